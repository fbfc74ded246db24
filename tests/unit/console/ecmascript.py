"""HTML `pattern` checks in a real ECMAScript engine: Node.js (on the machine for the console's assets).

`pattern_verdicts` compiles every pattern as a browser does, ``new RegExp("^(?:" + p + ")$", "v")``, and
tests every sample against each, in one `node` process (a few hundred milliseconds however many patterns).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass

NODE_TIMEOUT_SECONDS = 30
SCRIPT = r"""
const {patterns, samples} = JSON.parse(require("fs").readFileSync(0, "utf8"));
const verdicts = patterns.map((p) => {
  let expression;
  try { expression = new RegExp(`^(?:${p})$`, "v"); } catch (error) { return {error: error.message}; }
  return {error: null, accepts: samples.map((s) => expression.test(s))};
});
process.stdout.write(JSON.stringify(verdicts));
"""


@dataclass(frozen=True)
class Verdict:
    error: str | None  # the engine's SyntaxError message: the browser drops such a field's check
    accepts: tuple[bool, ...]  # per sample, when it compiled


def node() -> str:
    found = shutil.which("node")
    assert found is not None, "node (Node.js >= 20) is needed to check patterns as browsers compile them"
    return found


def pattern_verdicts(patterns: list[str], samples: list[str]) -> list[Verdict]:
    answer = subprocess.run(
        [node(), "-e", SCRIPT],
        input=json.dumps({"patterns": patterns, "samples": samples}),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=NODE_TIMEOUT_SECONDS,
        check=True,
    )
    return [Verdict(v["error"], tuple(v.get("accepts", ()))) for v in json.loads(answer.stdout)]
