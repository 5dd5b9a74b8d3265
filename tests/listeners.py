"""Which TCP sockets a process tree listens on, read from /proc (Linux): no tool, no psutil.

Used to check that a local Ray cluster binds loopback only.
"""

from __future__ import annotations

import os
from pathlib import Path


def _tree(root: int) -> set[int]:
    """``root`` and every process descended from it."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid not in out:
            out.add(pid)
            todo.extend(parents.get(pid, []))
    return out


def _socket_inodes(pid: int) -> set[str]:
    out = set()
    try:
        for fd in os.scandir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(fd.path)
            except OSError:
                continue
            if target.startswith("socket:["):
                out.add(target[8:-1])
    except OSError:
        pass
    return out


def _addr(hex_addr: str) -> str:
    host, port = hex_addr.split(":")
    if len(host) == 8:  # IPv4, little-endian
        ip = ".".join(str(int(host[i : i + 2], 16)) for i in (6, 4, 2, 0))
    else:  # IPv6: four little-endian 32-bit words
        words = [host[i : i + 8] for i in range(0, 32, 8)]
        raw = "".join("".join(w[j : j + 2] for j in (6, 4, 2, 0)) for w in words)
        ip = "[" + ":".join(raw[i : i + 4] for i in range(0, 32, 4)) + "]"
    return f"{ip}:{int(port, 16)}"


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:160].strip()
    except OSError:
        return "?"


def listeners(root: int) -> list[tuple[str, str]]:
    """(address:port, process command line) of every listening TCP socket in ``root``'s tree."""
    owner = {ino: pid for pid in _tree(root) for ino in _socket_inodes(pid)}
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            f = line.split()
            if f[3] == "0A" and f[9] in owner:  # 0A: LISTEN
                out.append((_addr(f[1]), _comm(owner[f[9]])))
    return sorted(set(out))


def is_loopback(addr: str) -> bool:
    """127.0.0.0/8, ::1, or IPv4-mapped 127.x (``::ffff:127.0.0.1``, how gRPC's dual-stack socket shows)."""
    host = addr.rsplit(":", 1)[0]
    return (
        host.startswith("127.")
        or host == "[0000:0000:0000:0000:0000:0000:0000:0001]"
        or host.startswith("[0000:0000:0000:0000:0000:FFFF:7F")
    )
