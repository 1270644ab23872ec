"""Helpers of the elastic package: store barriers (``store``), free ports (``distributed``), loggers."""
