"""Ports and stores for agents."""
import socket

__all__ = ["get_free_port", "get_socket_with_port"]


def get_socket_with_port():
    """A socket bound to a free port of localhost, listening (close it to free the port for someone else)."""
    for family, kind, proto, _, _ in socket.getaddrinfo("localhost", None, socket.AF_UNSPEC, socket.SOCK_STREAM):
        s = socket.socket(family, kind, proto)
        try:
            s.bind(("localhost", 0))
            s.listen(0)
            return s
        except OSError:
            s.close()
    raise RuntimeError("Failed to create a socket")


def get_free_port():
    """A port that was free a moment ago (another process may take it before you do)."""
    with get_socket_with_port() as s:
        return s.getsockname()[1]
