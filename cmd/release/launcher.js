#!/usr/bin/env node
// guard's npm launcher (the esbuild pattern): the binary is in the
// platform package npm installed beside this one as an optional
// dependency (@sandbox-guard/guard-linux-x64 or -arm64); this only finds
// it and runs it with the same arguments and exit status. Nothing is
// downloaded, here or at install time. Then `guard install` puts guard's
// own copy in ~/.shim (docs/install.md).
"use strict";
const { spawnSync } = require("child_process");
const pkg = "@sandbox-guard/guard-" + process.platform + "-" + process.arch;
let bin;
try {
  bin = require.resolve(pkg + "/bin/guard");
} catch (e) {
  process.stderr.write("guard: no " + pkg + " is installed: guard is built for linux x64 and arm64; " +
    "install it with npm install -g " + pkg + " @sandbox-guard/guard, or see docs/install.md\n");
  process.exit(127);
}
const r = spawnSync(bin, process.argv.slice(2), { stdio: "inherit" });
if (r.error) {
  process.stderr.write("guard: could not run " + bin + ": " + r.error.message + "\n");
  process.exit(126);
}
if (r.signal) {
  process.kill(process.pid, r.signal);
}
process.exit(r.status === null ? 1 : r.status);
