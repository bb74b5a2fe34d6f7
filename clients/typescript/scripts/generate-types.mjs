// Generates src/generated/{run-document,api}.ts from the two documents clawbridge generates from
// its Rust types (docs/run-document.schema.json, docs/openrpc.json), so the client's types cannot
// drift from the server. `--check` fails (exit 1) when the committed files are stale.
import { readFile, writeFile, mkdir } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import path from "node:path";
import { compile } from "json-schema-to-typescript";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../../..");
const out = path.resolve(here, "../src/generated");
const check = process.argv.includes("--check");
const banner = (source) =>
  `/* Generated from ${source} by scripts/generate-types.mjs; do not edit. */`;
const options = (source) => ({
  bannerComment: banner(source),
  additionalProperties: false,
  unreachableDefinitions: true,
  format: false,
  style: { semi: true },
});

// json-schema-to-typescript reads draft-07 `definitions`; the documents use 2020-12 (`$defs`,
// OpenRPC `components`). Rewrite the references, nothing else.
function toDraft7(schema, from, to) {
  const text = JSON.stringify(schema).replaceAll(`"$ref":"#/${from}/`, `"$ref":"#/${to}/`);
  return JSON.parse(text);
}

async function runDocument() {
  let schema = JSON.parse(await readFile(path.join(root, "docs/run-document.schema.json"), "utf8"));
  delete schema.$id;
  delete schema.$schema;
  schema.title = "RunDocument";
  schema = toDraft7(schema, "$defs", "definitions");
  schema.definitions = schema.$defs;
  delete schema.$defs;
  return compile(schema, "RunDocument", options("docs/run-document.schema.json"));
}

// "bridge.runStart" -> "RunStart", "rpc.discover" -> "Discover".
function typeStem(method) {
  const word = method.slice(method.indexOf(".") + 1);
  return word[0].toUpperCase() + word.slice(1);
}

async function api() {
  const document = JSON.parse(await readFile(path.join(root, "docs/openrpc.json"), "utf8"));
  const schemas = toDraft7(document.components.schemas, "components/schemas", "definitions");
  // Each method's params become one object type (`<Stem>Params`), its result the component it
  // names or, when inline, a type of its own (`<Stem>Result`): the method table below uses them.
  const table = [];
  for (const method of document.methods) {
    const stem = typeStem(method.name);
    const paramsName = `${stem}Params`;
    if (schemas[paramsName]) throw new Error(`${paramsName} is already a component`);
    schemas[paramsName] = toDraft7(
      {
        title: paramsName,
        description: `${method.name}'s params, by name.`,
        type: "object",
        properties: Object.fromEntries(
          // A `$ref` with a sibling description would become a copy of the referenced type.
          method.params.map((param) => [
            param.name,
            param.schema.$ref ? param.schema : { ...param.schema, description: param.summary || undefined },
          ]),
        ),
        required: method.params.filter((param) => param.required).map((param) => param.name),
      },
      "components/schemas",
      "definitions",
    );
    const ref = method.result.schema.$ref;
    let result;
    if (ref && ref.startsWith("#/components/schemas/")) {
      result = ref.slice("#/components/schemas/".length);
    } else {
      result = `${stem}Result`;
      if (schemas[result]) throw new Error(`${result} is already a component`);
      const schema = toDraft7(method.result.schema, "components/schemas", "definitions");
      // An object described by nothing but its kind (the OpenRPC document) is any object.
      if (schema.type === "object" && !schema.properties) schema.additionalProperties = true;
      schemas[result] = { title: result, ...schema };
    }
    table.push(`  ${JSON.stringify(method.name)}: { params: ${paramsName}; result: ${result} };`);
  }
  // One synthetic root that names every component, so each becomes an exported type.
  const rootSchema = {
    title: "BridgeApiTypes",
    type: "object",
    properties: Object.fromEntries(
      Object.keys(schemas).map((name) => [name, { $ref: `#/definitions/${name}` }]),
    ),
    additionalProperties: false,
    definitions: schemas,
  };
  const methods = document.methods.map((method) => `  | ${JSON.stringify(method.name)}`).join("\n");
  const types = await compile(rootSchema, "BridgeApiTypes", options("docs/openrpc.json"));
  return (
    `${types}\n/** Every method of the bridge API (docs/openrpc.json). */\nexport type BridgeMethod =\n${methods};\n` +
    `\n/** Each method's params (by name) and result (docs/openrpc.json). */\nexport interface BridgeMethods {\n${table.join("\n")}\n}\n`
  );
}

const files = {
  "run-document.ts": await runDocument(),
  "api.ts": await api(),
};
let stale = [];
await mkdir(out, { recursive: true });
for (const [name, text] of Object.entries(files)) {
  const target = path.join(out, name);
  if (check) {
    const current = await readFile(target, "utf8").catch(() => "");
    if (current !== text) stale.push(name);
  } else {
    await writeFile(target, text);
  }
}
if (stale.length) {
  console.error(`src/generated/${stale.join(", ")} stale: run \`npm run generate\` in clients/typescript`);
  process.exit(1);
}
