// OpenClaw's compiled functions and constants, found in the installed package's dist/ by the
// distinctive strings of openclaw-exports.json (the one place that says where they live).
// Shared by run.mjs (conformance) and bench.mjs (scripts/bench-vs-openclaw).

import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const here = path.dirname(new URL(import.meta.url).pathname);

export async function loadOpenClaw(openclawDir) {
  const spec = JSON.parse(fs.readFileSync(path.join(here, "openclaw-exports.json"), "utf8"));
  const installed = JSON.parse(fs.readFileSync(path.join(openclawDir, "package.json"), "utf8")).version;
  if (installed !== spec.version) {
    throw new Error(`openclaw ${installed} is installed; openclaw-exports.json maps ${spec.version}`);
  }
  const dist = path.join(openclawDir, "dist");
  const chunks = fs
    .readdirSync(dist)
    .filter((name) => name.endsWith(".js"))
    .map((name) => ({ name, text: fs.readFileSync(path.join(dist, name), "utf8") }));
  const chunkWith = (needle, what) => {
    const found = chunks.filter((chunk) => chunk.text.includes(needle));
    if (found.length !== 1) {
      throw new Error(`${what}: "${needle}" occurs in ${found.length} chunks of ${dist} (expected 1)`);
    }
    return found[0];
  };
  const oc = {};
  const mapping = {};
  for (const [name, needle] of Object.entries(spec.functions)) {
    const chunk = chunkWith(needle, name);
    const exportLine = chunk.text.match(/export \{([^}]*)\};?\s*$/m);
    const alias = exportLine?.[1]
      .split(",")
      .map((entry) => entry.trim().split(/\s+as\s+/))
      .find(([local]) => local === name);
    if (!alias) throw new Error(`${name}: not exported from ${chunk.name}`);
    const module = await import(pathToFileURL(path.join(dist, chunk.name)).href);
    oc[name] = module[alias[1] ?? alias[0]];
    mapping[name] = `${chunk.name} as ${alias[1] ?? alias[0]}`;
  }
  const constants = {};
  for (const [name, needle] of Object.entries(spec.constants)) {
    const chunk = chunkWith(needle, name);
    const start = chunk.text.indexOf(needle) + needle.length;
    const rest = chunk.text.slice(start);
    const literal = rest.startsWith("[") ? rest.slice(0, rest.indexOf("]") + 1) : rest.slice(0, rest.indexOf(";"));
    constants[name] = JSON.parse(literal.replace(/,\s*]/, "]"));
    mapping[name] = chunk.name;
  }
  return { oc, constants, mapping, spec };
}
