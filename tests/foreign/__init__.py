"""A foreign federation (Debian nginx + PowerDNS) drilled through the external target."""
