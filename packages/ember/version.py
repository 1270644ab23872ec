# Version of the ember meta-package (read by hatch; `hatch version minor` bumps it).
__version__ = "0.1.0"
