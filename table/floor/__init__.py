"""The floor: one service following every table through its brokers (``tablectl floor serve``).

It keeps the tables' signed records in a database (:mod:`table.floor.store`,
SQLite or PostgreSQL), notarises their checkpoints (:mod:`table.floor.notary`:
the highest one seen, never lowered), answers a table's start-up question for its
last checkpoint with an answer signed by the floor key (:mod:`table.floor.web`,
the table's side in :mod:`table.notary_client`), and serves the floor's reports
behind sign-in. It never imports the controller or the round's procedure: it reads
only what the tables signed (docs/architecture.md, room ``floor``).
"""
