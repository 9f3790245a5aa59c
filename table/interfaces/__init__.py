"""Front doors: what other programs and people connect to (docs/architecture.md).

The control socket, the event socket, MQTT and the terminal console. Each turns
outside input into commands for :class:`table.console.Console`, or the core's
events into bytes; none holds procedure. Imports only the core.
"""
