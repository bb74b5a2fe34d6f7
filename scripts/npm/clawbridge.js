#!/usr/bin/env node
// The `clawbridge` command of the npm package: finds the native binary of this platform (the
// optional dependency @clawbridge/cli-<platform>-<arch>, installed beside this package) and runs
// it with the same arguments, stdio and exit status. It is a launcher only: OpenClaw's
// `appServer.command` must name the native executable, which `clawbridge path` prints.
"use strict";
const { spawn } = require("node:child_process");
const fs = require("node:fs");
const path = require("node:path");

// The platforms a native package exists (or will exist) for; scripts/package-npm builds them.
const PLATFORMS = {
  "linux-x64": "@clawbridge/cli-linux-x64",
  "linux-arm64": "@clawbridge/cli-linux-arm64",
  "darwin-x64": "@clawbridge/cli-darwin-x64",
  "darwin-arm64": "@clawbridge/cli-darwin-arm64",
};

function nativeBinary() {
  const key = `${process.platform}-${process.arch}`;
  const name = PLATFORMS[key];
  if (!name) {
    throw new Error(`clawbridge has no native build for ${key} (built: ${Object.keys(PLATFORMS).join(", ")}); install it with cargo install instead`);
  }
  // Only this install's own copies: nested in this package's node_modules, or beside it in the
  // same node_modules (how npm installs an optional dependency). Never node's walk up through
  // every parent folder's node_modules, where anyone who can write a folder above this one
  // could plant a package that would run in its place.
  const own = path.resolve(__dirname, "..");
  const scopeless = name.split("/")[1];
  const candidates = [
    path.join(own, "node_modules", name),
    path.join(path.dirname(own), scopeless),
  ];
  const root = candidates.find((dir) => {
    try {
      const manifest = JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8"));
      return manifest.name === name;
    } catch {
      return false;
    }
  });
  if (!root) {
    throw new Error(`the native package ${name} is not installed with this one (npm skipped an optional dependency?); reinstall with optional dependencies (looked in ${candidates.join(" and ")})`);
  }
  const binary = path.join(root, "bin", process.platform === "win32" ? "clawbridge.exe" : "clawbridge");
  if (!fs.existsSync(binary)) throw new Error(`${binary} is missing from ${name}`);
  return binary;
}

let binary;
try {
  binary = nativeBinary();
} catch (error) {
  process.stderr.write(`clawbridge: ${error.message}\n`);
  process.exit(1);
}
// The native process dies with the launcher, even a SIGKILLed one (it asks the kernel for a
// SIGTERM when its parent goes: CLAWBRIDGE_PARENT_PID names the parent it must still have).
const child = spawn(binary, process.argv.slice(2), {
  stdio: "inherit",
  env: { ...process.env, CLAWBRIDGE_PARENT_PID: String(process.pid) },
});
// Signals sent to the launcher reach the native process; its end is the launcher's end.
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(signal, () => {
    if (child.exitCode === null) child.kill(signal);
  });
}
child.on("error", (error) => {
  process.stderr.write(`clawbridge: cannot run ${binary}: ${error.message}\n`);
  process.exit(1);
});
child.on("exit", (code, signal) => {
  if (signal) {
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
  } else {
    process.exit(code ?? 1);
  }
});
