"""An editor's view of the checker: a language server with mypy behind it, driven over LSP.

python-lsp-server (``pylsp``) with the ``pylsp-mypy`` plugin in daemon mode
is started over stdio, and this test talks to it as an editor does, with
JSON-RPC framed by ``Content-Length`` headers: ``initialize``, ``didOpen``
of a file with an SPMD bug, the ``spmd-partial-affine`` diagnostic in
``publishDiagnostics`` at the operator's range, then ``didChange`` and
``didSave`` with the fix, and the diagnostic gone.  The project is set up
as docs/checker.md says: pyproject.toml with the recommended ``[tool.mypy]``
and the page's ``[tool.pylsp-mypy]`` block, the daemon's own
mypy-daemon.ini.  Every wait for a message is bounded; nothing asserts how
long a step took.
"""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.plugin.harness import ROOT

FIRST_CHECK_S = 600
"""The first check starts the daemon, which analyses torch: a cold run's time, longer on a busy machine."""
LATER_CHECK_S = 300

BUGGY = """\
from spmd_stubs import P, R, Tensor, all_reduce
from spmd_stubs.axes import tp


def bias_after(partial: Tensor[P@tp], bias: Tensor[R@tp]) -> Tensor[R@tp]:
    return partial + bias
"""
FIXED = BUGGY.replace("return partial + bias", "return all_reduce(partial, tp, src=P, dst=R) + bias")


def docs_block(info: str, first_line: str) -> str:
    """The ``info`` fenced block of docs/checker.md that starts with ``first_line``."""
    blocks = re.findall(rf"^```{info}\n(.*?)^```", (ROOT / "docs" / "checker.md").read_text(), re.S | re.M)
    found = [block for block in blocks if block.startswith(first_line + "\n")]
    assert found, f"no {info} block starting {first_line!r} in docs/checker.md"
    return found[0]


Message = dict[str, Any]


class LanguageServer:
    """A client end of one language server process: framed JSON-RPC over its stdin and stdout."""

    def __init__(self, command: list[str], cwd: Path, env: dict[str, str], log: Path) -> None:
        self.log = log
        self._stderr = open(log, "wb")
        self.process = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self._stderr)
        self.messages: queue.Queue[Message | None] = queue.Queue()
        self._next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        while True:
            headers: dict[str, str] = {}
            while (line := stdout.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode("ascii").partition(":")
                headers[name.strip().lower()] = value.strip()
            if not line:
                self.messages.put(None)  # the server closed its end
                return
            self.messages.put(json.loads(stdout.read(int(headers["content-length"]))))

    def send(self, message: Message) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode("utf-8")
        stdin = self.process.stdin
        assert stdin is not None
        stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        stdin.flush()

    def notify(self, method: str, params: Message) -> None:
        self.send({"method": method, "params": params})

    def request(self, method: str, params: Message, timeout: float) -> Any:
        self._next_id += 1
        number = self._next_id
        self.send({"id": number, "method": method, "params": params})
        reply = self.wait_for(lambda m: m.get("id") == number and "method" not in m, timeout, f"the reply to {method}")
        assert "error" not in reply, reply
        return reply.get("result")

    def wait_for(self, wanted: Callable[[Message], bool], timeout: float, what: str) -> Message:
        """The next message ``wanted`` picks; the server's own requests are answered (null) on the way."""
        seen: list[str] = []
        while True:
            try:
                message = self.messages.get(timeout=timeout)
            except queue.Empty:
                pytest.fail(f"no {what} within {timeout} s; saw {seen}; server log:\n{self._log_tail()}")
            if message is None:
                pytest.fail(f"the server exited before {what}; saw {seen}; server log:\n{self._log_tail()}")
            if "method" in message and "id" in message:
                self.send({"id": message["id"], "result": None})
            if wanted(message):
                return message
            seen.append(message.get("method", f"reply {message.get('id')}"))

    def _log_tail(self) -> str:
        self._stderr.flush()
        return self.log.read_text(errors="replace")[-4000:]

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                self.request("shutdown", {}, timeout=60)
                self.notify("exit", {})
                self.process.wait(timeout=60)
            finally:
                if self.process.poll() is None:
                    self.process.kill()
                    self.process.wait()
        self._stderr.close()


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Path]:
    """A user's project set up as docs/checker.md says.

    pyproject.toml holds the recommended ``[tool.mypy]`` (with the skip
    sections, for CI) and the ``[tool.pylsp-mypy]`` settings, which point the
    daemon at mypy-daemon.ini (the plugin, no skip sections).  The daemon
    writes no cache: each run's first check analyses torch.
    """
    project = tmp_path / "project"
    project.mkdir()
    pyproject = docs_block("toml", "[tool.mypy]") + "\n" + docs_block("toml", "[tool.pylsp-mypy]")
    (project / "pyproject.toml").write_text(pyproject)
    daemon_config = docs_block("ini", "# mypy-daemon.ini: the editor's daemon (no follow_imports = skip sections)")
    # A plugin setting only this file has: its note shows the daemon reads it, not pyproject.toml.
    (project / "mypy-daemon.ini").write_text(daemon_config + "\n[spmd_mypy]\nshow_fixes = true\n")
    try:
        yield project
    finally:
        subprocess.run([sys.executable, "-m", "mypy.dmypy", "--status-file", str(project / ".dmypy.json"), "kill"],
                       cwd=project, capture_output=True, timeout=120)


def _spmd(message: Message) -> list[Message]:
    return [d for d in message["params"]["diagnostics"] if str(d.get("code", "")).startswith("spmd-")]


def test_the_editor_shows_the_spmd_error_and_clears_it_when_fixed(project: Path) -> None:
    source = project / "model.py"
    source.write_text(BUGGY)
    uri = source.as_uri()
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "MYPY_FORCE_COLOR": "0"}
    server = LanguageServer([sys.executable, "-m", "pylsp", "-v"], project, env, project.parent / "pylsp.log")
    try:
        server.request("initialize", {"processId": os.getpid(), "rootUri": project.as_uri(), "capabilities": {},
                                      "workspaceFolders": [{"uri": project.as_uri(), "name": "project"}]},
                       timeout=120)
        server.notify("initialized", {})
        server.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                                 "text": BUGGY}})

        def diagnostics_of_model(message: Message) -> bool:
            return message.get("method") == "textDocument/publishDiagnostics" and message["params"]["uri"] == uri

        published = server.wait_for(lambda m: diagnostics_of_model(m) and bool(_spmd(m)), FIRST_CHECK_S,
                                    "spmd diagnostic for model.py")
        [error] = _spmd(published)
        line = BUGGY.splitlines().index("    return partial + bias")
        start = BUGGY.splitlines()[line].index("partial + bias")
        assert error["code"] == "spmd-partial-affine", error
        assert error["severity"] == 1, error  # Error
        assert error["range"] == {"start": {"line": line, "character": start},
                                  "end": {"line": line, "character": start + len("partial + bias")}}, error
        assert error["message"] == "add adds a Partial to a non-Partial operand on axis tp (P@tp + R@tp)", error
        notes = [d["message"] for d in published["params"]["diagnostics"] if d["range"]["start"]["line"] == line
                 and d is not error]
        assert notes[0] == "In `partial + bias`: the R@tp term would be counted once per rank by the pending sum.", notes
        assert notes[1].startswith("Fix: all_reduce(x, tp, src=P, dst=R)") and notes[-1].startswith("Fix as an edit:")

        # The editor writes the fix, then tells the server: the change, then the save.
        source.write_text(FIXED)
        server.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2},
                                                 "contentChanges": [{"text": FIXED}]})
        server.notify("textDocument/didSave", {"textDocument": {"uri": uri}})
        cleared = server.wait_for(lambda m: diagnostics_of_model(m) and not _spmd(m), LATER_CHECK_S,
                                  "diagnostics without the spmd error")
        assert cleared["params"]["diagnostics"] == [], cleared
    finally:
        server.close()
