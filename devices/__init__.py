"""Device drivers: :class:`Shuffler` and :class:`CardShoe`."""

from .drivers import CardShoe, DeviceDriver, Shuffler

__all__ = ["CardShoe", "DeviceDriver", "Shuffler"]
