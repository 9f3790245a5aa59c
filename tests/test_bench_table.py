"""The bench table the screen tests sign in to is the table they started: under a loaded
machine (another suite alongside), a port found free and then only probed for a listener
was taken meanwhile by another process, the probe found that one, and the dealer's sign-in
waited 60 s on it for an answer that never came (issue 40)."""

from __future__ import annotations

import socket

import console_helpers
from console_helpers import ApiDealer, BenchTable


def test_a_bench_signs_in_to_its_own_table_when_another_process_holds_the_port_it_would_have_probed(
        tmp_path, monkeypatch):
    with socket.socket() as squatter:  # another process's listener: it accepts and never answers
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        # the port a bench once found free before its table started: the squatter's by then
        monkeypatch.setattr(console_helpers, "free_port", lambda: taken)
        bench = BenchTable(tmp_path / "bench")
        try:
            api = ApiDealer(bench)
            try:
                assert api.request({"action": "whoami"})["person"] == "D-4"
            finally:
                api.close()
        finally:
            bench.stop()
