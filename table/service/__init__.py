"""Running under systemd: sd_notify, the watchdog and the service-mode hooks of ``tablectl run``."""
