"""Benches and labs: the chaos soak and scenarios, conformance targets, the pytest plugin,
the remote (simulated) dealer. The one room that joins the emulators and the host's drivers."""
