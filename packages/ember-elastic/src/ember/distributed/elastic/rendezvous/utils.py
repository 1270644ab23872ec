"""Parsing of rendezvous endpoints and options, and whether a host name is this machine."""
import ipaddress
import re
import socket

__all__ = ["parse_rendezvous_endpoint"]


def _parse_rendezvous_config(config_str):
    """"k1=v1,k2=v2" -> {"k1": "v1", "k2": "v2"} (ValueError for a missing key or value)."""
    config = {}
    config_str = config_str.strip()
    if not config_str:
        return config
    for item in config_str.split(","):
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not key:
            raise ValueError("The rendezvous configuration string must be in format "
                             "<key1>=<value1>,...,<keyN>=<valueN>.")
        if not sep or not value:
            raise ValueError(f"The rendezvous configuration option '{key}' must have a value specified.")
        config[key] = value
    return config


def parse_rendezvous_endpoint(endpoint, default_port):
    """"host[:port]" (IPv6 hosts in brackets) -> (host, port); an empty endpoint is ("localhost", default_port)."""
    endpoint = (endpoint or "").strip()
    if not endpoint:
        return "localhost", default_port
    if endpoint[0] == "[" and endpoint[-1] == "]":
        host, rest = endpoint, None
    else:
        host, sep, rest = endpoint.rpartition(":")
        if not sep:
            host, rest = endpoint, None
    if len(host) > 1 and host[0] == "[" and host[-1] == "]":
        host = host[1:-1]
    port = default_port
    if rest is not None:
        if not re.fullmatch(r"[0-9]{1,5}", rest) or int(rest) >= 2 ** 16:
            raise ValueError(f"The port number of the rendezvous endpoint '{endpoint}' must be an integer between 0 "
                             "and 65536.")
        port = int(rest)
    if not re.fullmatch(r"[\w\.:-]+", host):
        raise ValueError(f"The hostname of the rendezvous endpoint '{endpoint}' must be a dot-separated list of "
                         "labels, an IPv4 address, or an IPv6 address.")
    return host, port


def _matches_machine_hostname(host):
    """Whether ``host`` names this machine (loopback, its host name, or one of its addresses)."""
    if host == "localhost":
        return True
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        addr = None
    if addr is not None and addr.is_loopback:
        return True
    this_host = socket.gethostname()
    if host == this_host:
        return True
    try:
        host_ips = {info[4][0] for info in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)}
        mine = socket.getaddrinfo(this_host, None, proto=socket.IPPROTO_TCP, flags=socket.AI_CANONNAME)
    except (ValueError, socket.gaierror):
        return False
    return any(info[3] == host or info[4][0] in host_ips or (addr is not None and info[4][0] == str(addr))
               for info in mine)
