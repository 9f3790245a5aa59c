"""The gaming day's room: the day's rules (openings, slips, drops), its report, its journal segments and archives, and the signed report. See docs/architecture.md."""
