"""Issue 38's sandbox classes, each against real sandboxes (bubblewrap, seccomp, the driver).

4. The case namespaces covered pid, mount and IPC but not the network: kernel state that no
   process holds (the loopback's counters) carried data from one stdio case to the next. On a
   host without case namespaces, nothing guarded the network namespace: an abstract name or a
   count of sockets kept in flight with no process, or the loopback's counters (no filter),
   still did. The driver now compares the namespace before and after each case, and a case
   that changed it sends the item's later cases to a network namespace of their own (a new
   one per case, or a new sandbox); an honest item pays no new namespace.
2. Without a memory cgroup, local socket buffers raised to the host's maximum held over 1 GiB
   under a 256 MiB limit, counted by no rlimit. At the default size, queues of datagrams
   from closed senders and connections never accepted still held 528 MiB under 256 MiB (one
   process) and 222 MiB on one listening socket.
5. In assert mode, names the test used but did not define (the prompt's helpers) were taken
   from the program, which could redefine them and was handed the expected values.
6. The seccomp filter allowed calls that Docker's and podman's default profiles refuse and no
   test program needs.
And the event-loop rule: two real worker processes on a real Redis queue (0.5 s visibility
timeout) score a hostile item at its size limit beside an honest one; work proportional to the
hostile item's size on a worker's event loop would stop its heartbeats, and the other worker
would claim it again.
"""

from __future__ import annotations

import json
import os
import textwrap
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.code.test_hostile import score
from tests.code.test_hostile_depth import _runner, case_outputs, verdicts
from tests.conftest import RedisServer, RunningService, redis_env
from tribunal.code import CodeConfig, CodeItem, CodeRunVerifier, CodeVerifier, RunItem
from tribunal.code.api import create_app
from tribunal.code.settings import CodeSettings

pytestmark = pytest.mark.timeout(120)


LOOPBACK_COUNTER = """
    import socket
    def received():
        for line in open('/proc/net/dev'):
            name, _, counters = line.partition(':')
            if name.strip() == 'lo':
                return int(counters.split()[1])  # packets received
        return 0
    print(received())
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for _ in range(5):
            s.sendto(b'case', ('127.0.0.1', 9))
    except OSError:
        pass  # no loopback: nothing to move
"""


@pytest.mark.parametrize("namespaces", [True, False], ids=["case_namespaces", "cleanup_only"])
async def test_no_stdio_case_reads_the_loopback_counters_of_another(
    namespaces: bool, bare_code_verifier: CodeVerifier
) -> None:
    """Without seccomp a program may send datagrams (no network either way: loopback only).
    A case that finds the counter moved has read what an earlier case wrote: each case has a
    network namespace of its own (case namespaces), or the later cases run in a new sandbox
    (the clean-up alone: the sandbox's loopback is up, and its counters stay)."""
    assert bare_code_verifier.case_namespaces, "this host gives each case its namespaces"
    _runner(bare_code_verifier).case_namespaces = namespaces
    cases = [{"stdin": "", "stdout": "0"} for _ in range(3)]
    outcome = await score(bare_code_verifier, LOOPBACK_COUNTER, {"kind": "stdio", "cases": cases})
    assert verdicts(outcome) == ["accepted"] * 3, outcome.details


# Sockets the seccomp filter allows (AF_UNIX) left alive with no process: all sent in one
# message over a socket whose own queue holds it, so that none is ever released and no
# process of the case wakes the kernel's collector (another program closing a socket does,
# and frees them: whether they outlive the case is a race, hence many cases).
IN_FLIGHT = """
import socket
names = [line.split()[-1] for line in open('/proc/net/unix') if '@' in line]
used = sum(int(line.split()[2]) for line in open('/proc/net/protocols') if line[:4] == 'UNIX')
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
kept = [socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) for _ in range(3)]
{check}
socket.send_fds(b, [b'x'], [a.fileno(), b.fileno(), *(s.fileno() for s in kept)])
"""
IN_FLIGHT_CHANNELS = {
    # An abstract name (the data a case could leave in it): listed, and taken for a bind.
    "abstract_name": """
try:
    kept[0].bind(b'\\0left-by-a-case')
    taken = False
except OSError:
    taken = True
print('seen' if taken or names else 'clean')
""",
    # The namespace's count of its AF_UNIX sockets, which a case moves by as many as it
    # leaves.
    "socket_count": "print('seen' if used else 'clean')",
}


@pytest.mark.parametrize("namespaces", [True, False], ids=["case_namespaces", "cleanup_only"])
@pytest.mark.parametrize("channel", sorted(IN_FLIGHT_CHANNELS))
async def test_no_stdio_case_finds_the_sockets_an_earlier_one_left_in_flight(
    channel: str, namespaces: bool, code_verifier: CodeVerifier
) -> None:
    """Each case looks for what the earlier ones left, then leaves its own: with the filter
    on, the sockets a program may make, kept in flight with no process. No case may find
    any, with case namespaces (a new network namespace for every case after the first that
    left some) and without (a new sandbox)."""
    assert code_verifier.case_namespaces, "this host gives each case its namespaces"
    _runner(code_verifier).case_namespaces = namespaces
    program = IN_FLIGHT.format(check=IN_FLIGHT_CHANNELS[channel])
    cases = [{"stdin": "", "stdout": "clean"} for _ in range(8)]
    outcome = await score(code_verifier, program, {"kind": "stdio", "cases": cases})
    assert verdicts(outcome) == ["accepted"] * 8, outcome.details


IN_FLIGHT_CPP = r"""
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <sys/socket.h>
#include <sys/un.h>

int main() {
    int pair[2];
    socketpair(AF_UNIX, SOCK_DGRAM, 0, pair);
    int named = socket(AF_UNIX, SOCK_DGRAM, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    const char name[] = "\0left-by-a-case";
    std::memcpy(address.sun_path, name, sizeof name - 1);
    socklen_t length = offsetof(sockaddr_un, sun_path) + sizeof name - 1;
    bool taken = bind(named, reinterpret_cast<sockaddr*>(&address), length) != 0;
    std::puts(taken ? "seen" : "clean");
    int fds[3] = {pair[0], pair[1], named};
    char byte = 'x';
    iovec data{&byte, 1};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof fds)];
    msghdr message{};
    message.msg_iov = &data;
    message.msg_iovlen = 1;
    message.msg_control = control;
    message.msg_controllen = sizeof control;
    cmsghdr* rights = CMSG_FIRSTHDR(&message);
    rights->cmsg_level = SOL_SOCKET;
    rights->cmsg_type = SCM_RIGHTS;
    rights->cmsg_len = CMSG_LEN(sizeof fds);
    std::memcpy(CMSG_DATA(rights), fds, sizeof fds);
    sendmsg(pair[1], &message, 0);
}
"""


async def test_a_cpp_program_is_compiled_again_in_the_new_sandbox(
    code_verifier: CodeVerifier,
) -> None:
    """Without case namespaces, the later cases of a C++ program that left an abstract name
    in flight run in a new sandbox, where it is compiled again: none finds the name."""
    _runner(code_verifier).case_namespaces = False
    cases = [{"stdin": "", "stdout": "clean"} for _ in range(4)]
    item = CodeItem(
        id="s", language="cpp", code=IN_FLIGHT_CPP, tests={"kind": "stdio", "cases": cases}
    )
    [outcome] = await code_verifier.score([item])
    assert verdicts(outcome) == ["accepted"] * 4, outcome.details


async def test_only_a_case_that_left_state_pays_for_a_network_namespace(
    code_verifier: CodeVerifier,
) -> None:
    """An honest item's cases share the sandbox's network namespace (the driver made no
    ``CLONE_NEWNET``: every case is in the same one); after a case that left sockets in
    flight, the later cases each get a new one."""
    assert code_verifier.case_namespaces, "this host gives each case its namespaces"
    where = "import os\nprint(os.readlink('/proc/self/ns/net'))\n"
    honest = await case_outputs(code_verifier, where, cases=4)
    assert len(set(honest)) == 1, honest
    hostile = await case_outputs(
        code_verifier, where + IN_FLIGHT.format(check="del names, used"), cases=4
    )
    assert len(set(hostile)) > 1, hostile


# -- class 6: the calls container default profiles refuse ---------------------------------------

CONTAINER_CALLS: dict[str, tuple[Any, ...]] = {  # x86_64 numbers; arguments harmless either way
    "modify_ldt": (154, 0, "buf", 16),  # read the LDT: works without the filter
    "name_to_handle_at": (303, -100, b".", "buf", "buf", 0),
    "open_by_handle_at": (304, -1, "buf", 0),
    "io_setup": (206, 1, "buf"),  # works without the filter
    "io_submit": (209, 0, 0, None),
    "io_getevents": (208, 0, 0, 0, None, None),
    "io_pgetevents": (333, 0, 0, 0, None, None, None),
    "io_cancel": (210, 0, None, None),
    "io_destroy": (207, 0),
    "set_mempolicy": (238, 0, None, 0),  # MPOL_DEFAULT: works without the filter
    "get_mempolicy": (239, None, None, 0, None, 0),
    "mbind": (237, 0, 0, 0, None, 0, 0),
    "migrate_pages": (256, 0, 0, None, None),
    "move_pages": (279, 0, 0, None, None, None, 0),
    "set_mempolicy_home_node": (450, 0, 0, 0, 0),
    "mount": (165, None, None, None, 0, None),
    "umount2": (166, None, 0),
    "pivot_root": (155, None, None),
    "move_mount": (429, -1, None, -1, None, 0),
    "open_tree": (428, -1, None, 0),
    "fsopen": (430, None, 0),
    "fsconfig": (431, -1, 0, None, None, 0),
    "fsmount": (432, -1, 0, 0),
    "fspick": (433, -1, None, 0),
    "mount_setattr": (442, -1, None, 0, None, 0),
    "unshare": (272, 0),  # no flags: works without the filter
    "setns": (308, -1, 0),
    "acct": (163, None),
    "clock_adjtime": (305, -1, None),
    "clock_settime": (227, -1, None),
    "settimeofday": (164, None, None),
    "syslog": (103, 10, None, 0),  # the size of the kernel's log buffer
    "vhangup": (153,),
    "init_module": (175, None, 0, None),
    "finit_module": (313, -1, None, 0),
    "delete_module": (176, None, 0),
    "create_module": (174, None, 0),
    "get_kernel_syms": (177, None),
    "query_module": (178, None, 0, None, 0, None),
    "kexec_load": (246, 0, 0, None, 0),
    "kexec_file_load": (320, -1, -1, 0, None, 0),
    "ioperm": (173, 0, 0, 0),
    "iopl": (172, 0),
    "lookup_dcookie": (212, 0, None, 0),
    "nfsservctl": (180, 0, None, None),
    "quotactl": (179, 0, None, 0, None),
    "quotactl_fd": (443, -1, 0, 0, None),
    "reboot": (169, 0, 0, 0, None),  # wrong magic numbers
    "swapon": (167, None, 0),
    "swapoff": (168, None),
    "sysfs": (139, 3),  # how many file system types: works without the filter
    "_sysctl": (156, None),
    "uselib": (134, None),
    "ustat": (136, 0, None),
    "personality_addr_no_randomize": (135, 0x0040000),  # works without the filter
    "personality_read_implies_exec": (135, 0x0400000),
    "personality_query": (135, 0xFFFFFFFF),
    "clone_newns": (56, 0x00020000 | 0x200, 0, 0, 0, 0),  # with CLONE_FS: EINVAL unfiltered
    "clone_newnet": (56, 0x40000000 | 0x200 | 0x00020000, 0, 0, 0, 0),
    "clone_newuser": (56, 0x10000000 | 0x200 | 0x00020000, 0, 0, 0, 0),
    "clone3": (435, None, 0),  # ENOSYS, so that the C library falls back to clone
}
ALLOWED_CALLS: dict[str, tuple[Any, ...]] = {
    "personality_default": (135, 0),
    "personality_linux32": (135, 0x8),
    "personality_uname26": (135, 0x20000),
    "personality_back": (135, 0),
}
CALLS_PROGRAM = """
import ctypes, errno, json
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
out = {}
for name, (nr, *args) in {**CALLS, **ALLOWED}.items():
    buf = ctypes.create_string_buffer(4096)
    args = [buf if a == 'buf' else ctypes.c_long(a) if isinstance(a, int) else a for a in args]
    ctypes.set_errno(0)
    rc = libc.syscall(ctypes.c_long(nr), *args)
    out[name] = 'ok' if rc >= 0 else errno.errorcode.get(ctypes.get_errno(), '?')
print(json.dumps(out))
"""


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="x86_64 system call numbers")
async def test_the_filter_refuses_what_container_default_profiles_refuse(
    run_verifier: CodeRunVerifier, bare_run_verifier: CodeRunVerifier
) -> None:
    program = f"CALLS = {CONTAINER_CALLS!r}\nALLOWED = {ALLOWED_CALLS!r}\n{CALLS_PROGRAM}"
    item = RunItem(id="c", language="python", code=program, limits={"memory_mb": 256})
    [filtered] = await run_verifier.score([item])
    got = json.loads(filtered.details["stdout"])
    assert {name: got.pop(name) for name in ALLOWED_CALLS} == dict.fromkeys(ALLOWED_CALLS, "ok")
    want = {name: "ENOSYS" if name == "clone3" else "EPERM" for name in CONTAINER_CALLS}
    assert got == want
    # Without the filter these answer otherwise here (so the test can fail): each was the
    # kernel's to refuse or to do.
    [bare] = await bare_run_verifier.score([item])
    got = json.loads(bare.details["stdout"])
    for name in ("modify_ldt", "io_setup", "set_mempolicy", "unshare", "sysfs"):
        assert got[name] == "ok", (name, got[name])
    assert got["personality_addr_no_randomize"] == "ok"
    for name in ("clone_newns", "clone_newnet", "clone_newuser", "clone3"):
        assert got[name] == "EINVAL", (name, got[name])
    assert got["name_to_handle_at"] != "EPERM" and got["io_submit"] != "EPERM"


# -- class 2: kernel memory outside every limit --------------------------------------------------

SOCKET_BUFFERS = """
    import socket, sys
    pairs, held = [], 0
    for _ in range(PAIRS):
        a, b = socket.socketpair()
        pairs.append((a, b))
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 30)  # the host's wmem_max
        b.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 30)
        a.setblocking(False)
        try:
            while True:
                held += a.send(bytes(1 << 16))
        except BlockingIOError:
            pass
    print(held >> 20)
"""


async def test_socket_buffers_cannot_be_raised_past_the_hosts_default(
    run_verifier: CodeRunVerifier, bare_run_verifier: CodeRunVerifier
) -> None:
    # 160 pairs at the host's wmem_max (4 MiB, doubled by the kernel, here) would hold over
    # 1 GiB that no rlimit counts, under a 256 MiB limit: refused at the first raise, before
    # a byte is held (so this machine's memory is never at stake).
    greedy = RunItem(
        id="g",
        language="python",
        code=textwrap.dedent(SOCKET_BUFFERS.replace("PAIRS", "160")),
        limits={"memory_mb": 256},
    )
    [outcome] = await run_verifier.score([greedy])
    assert outcome.details["verdict"] == "runtime_error", outcome.details
    assert outcome.details["stdout"] == ""
    assert "PermissionError" in outcome.details["stderr"]
    # Without the filter two pairs already hold far more than their share of the default
    # buffers (so the test can fail): the raise is what the filter refuses.
    small = greedy.model_copy(
        update={"code": textwrap.dedent(SOCKET_BUFFERS.replace("PAIRS", "2"))}
    )
    [bare] = await bare_run_verifier.score([small])
    assert bare.details["verdict"] == "accepted", bare.details
    assert int(bare.details["stdout"]) > 2


DATAGRAM_QUEUES = """
    import os, socket
    held, kept = 0, []
    while True:  # a receiver per file, each queue filled by senders closed after one datagram
        try:
            receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        except OSError:
            break
        kept.append(receiver)
        name = "\\0held-%d-%d" % (os.getpid(), len(kept))
        receiver.bind(name)
        while True:
            try:
                sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            except OSError:
                break
            sender.setblocking(False)
            try:
                held += sender.sendto(bytes(200_000), name)
            except OSError:
                break
            finally:
                sender.close()
    print(held >> 20, len(kept))
"""

LISTEN_QUEUE = """
    import os, socket
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    name = "\\0pending-%d" % os.getpid()
    listener.bind(name)
    listener.listen(4096)  # the kernel takes at most net.core.somaxconn
    held = 0
    for _ in range(CLIENTS):  # connections never accepted, each holding its closed client's data
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.setblocking(False)
        client.connect(name)
        try:
            while True:
                held += client.send(bytes(1 << 16))
        except BlockingIOError:
            pass
        client.close()
    print(held >> 20)
"""


async def test_local_sockets_hold_no_more_than_the_memory_limit(
    run_verifier: CodeRunVerifier,
) -> None:
    # Datagram queues: each receiving file holds max_dgram_qlen + 1 datagrams from senders
    # that closed. With the host's 256 open files, one process held 528 MiB in 253 files
    # under a 256 MiB limit (and under 512 MiB); its open files are now as many as its memory
    # limit pays for: 111 MiB in 54 files under 128 MiB (230 under 256, 472 under 512).
    queues = RunItem(
        id="q",
        language="python",
        code=textwrap.dedent(DATAGRAM_QUEUES),
        limits={"memory_mb": 128},
    )
    [outcome] = await run_verifier.score([queues])
    assert outcome.details["verdict"] == "accepted", outcome.details
    held_mib, files = map(int, outcome.details["stdout"].split())
    assert 0 < held_mib <= 128 and files > 8, outcome.details["stdout"]
    # A listening socket kept every connection never accepted, up to somaxconn (4096), each
    # holding its closed client's buffer: 1000 held 222 MiB on one file. A backlog past the
    # filter's bound is refused before a byte is held.
    pending = queues.model_copy(
        update={"code": textwrap.dedent(LISTEN_QUEUE.replace("CLIENTS", "1000"))}
    )
    [refused] = await run_verifier.score([pending])
    assert refused.details["verdict"] == "runtime_error", refused.details
    assert "PermissionError" in refused.details["stderr"]
    # The same program at the bound holds 11 buffers, and runs.
    small = LISTEN_QUEUE.replace("listen(4096)", "listen(10)").replace("CLIENTS", "11")
    at_bound = queues.model_copy(update={"code": textwrap.dedent(small)})
    [bounded] = await run_verifier.score([at_bound])
    assert bounded.details["verdict"] == "accepted", bounded.details
    assert int(bounded.details["stdout"]) <= 3


async def test_readyz_says_what_each_missing_layer_leaves_open() -> None:
    app = create_app(CodeSettings(queue="memory"))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            checks = (await client.get("/readyz")).json()["checks"]
    for name in ("code", "code_run"):
        layers = checks[f"layers.{name}"]
        missing = {
            layer
            for layer in ("seccomp", "case_namespaces", "memory_cgroup")
            if layers[layer] is False
        }
        assert set(layers["open"]) == missing
        if "memory_cgroup" in missing:  # this host: the sockets the filter leaves at default
            assert "up to the memory limit per process" in layers["open"]["memory_cgroup"]
    # A configuration without the filter says what that opens, before it ever starts.
    bare = CodeVerifier(CodeConfig(seccomp=False)).layers["open"]
    assert set(bare) == {"seccomp", "case_namespaces", "memory_cgroup"}
    assert "socket buffers" in bare["seccomp"]


# -- class 5: assert tests take only the entry point from the program ----------------------------

HELPER_THIEF = """
    seen = []
    def encode(s):  # the prompt's helper, redefined: the test hands it the answers
        seen.append(s)
        return s[::-1]
    def decode(s):
        return seen[-1] if seen else s
"""
HONEST_DECODE = """
    def encode(s):
        return s[::-1]
    def decode(s):
        return s[::-1]
"""
CHECK = """
def check(candidate):
    for word in ['abc', 'hello', 'tribunal']:
        assert candidate(encode(word)) == word
"""
OWN_HELPER = "def encode(s):\n    return s[::-1]\n" + CHECK


async def test_an_assert_test_brings_its_own_helpers(code_verifier: CodeVerifier) -> None:
    def tests(test: str) -> dict[str, Any]:
        return {"kind": "assert", "entry_point": "decode", "test": test}

    # With its own helper, the program's version is never called: the thief fails and the
    # honest program passes.
    stolen = await score(code_verifier, HELPER_THIEF, tests(OWN_HELPER))
    assert verdicts(stolen) == ["wrong_answer"]
    honest = await score(code_verifier, HONEST_DECODE, tests(OWN_HELPER))
    assert verdicts(honest) == ["accepted"]
    # Without it, the helper was taken from the program (the thief was paid): now the test is
    # unusable, an item error naming the field and the name, never a reward.
    for program in (HELPER_THIEF, HONEST_DECODE):
        outcome = await score(code_verifier, program, tests(CHECK))
        assert outcome.reward is None and outcome.error is not None
        assert outcome.error.code == "bad_input" and outcome.error.field == "tests.test"
        assert "'encode'" in outcome.error.message and "'decode'" in outcome.error.message
    # The entry point by its own name is still the program's.
    by_name = "def check(candidate):\n    assert decode('cba') == 'abc'\n"
    assert verdicts(await score(code_verifier, HONEST_DECODE, tests(by_name))) == ["accepted"]


# -- the event-loop rule: a hostile item at its size limit delays no honest one ------------------


def two_code_workers(
    service: Callable[..., RunningService],
    redis_server: RedisServer,
    key_prefix: str,
    visibility_s: str,
    heartbeat_s: str,
) -> RunningService:
    """The code service with two worker processes on a real Redis queue, one delivery
    allowed (a second one dead-letters the item) and no result cache."""
    return service(
        "code",
        workers=2,
        env=redis_env(
            redis_server,
            key_prefix,
            TRIBUNAL_CODE_SLOTS="2",
            TRIBUNAL_CODE_WORKERS="2",
            TRIBUNAL_VISIBILITY_TIMEOUT_S=visibility_s,
            TRIBUNAL_WORKER_HEARTBEAT_S=heartbeat_s,
            TRIBUNAL_MAX_DELIVERIES="1",
            TRIBUNAL_CACHE_TTL_S="0",
        ),
    )


@pytest.mark.slow
def test_a_hostile_reply_at_the_cap_delays_no_honest_item_and_is_scored_once(
    service: Callable[..., RunningService], redis_server: RedisServer, key_prefix: str
) -> None:
    # A return value at the largest output cap (16 MiB) that the bytes cannot decide, against
    # a small expected value: its parse held the worker's event loop for about 1 s of CPU, so
    # its heartbeats stopped (0.5 s visibility timeout here) and the other worker claimed it:
    # a second delivery, which with one delivery allowed dead-letters the item (an error
    # result instead of its verdict). Two worker processes, a real Redis queue.
    running = two_code_workers(service, redis_server, key_prefix, "0.5", "0.05")
    cap = CodeConfig().max_output_bytes
    one_call = {"kind": "function", "entry_point": "f", "cases": [{"expected": [1.5]}]}
    hostile = {
        "id": "hostile",
        "language": "python",
        "code": f"def f():\n    return [{{'k': 10**20}}] * {cap // 44}\n",
        "tests": one_call,
        "limits": {"timeout_s": 30.0, "max_output_bytes": cap, "memory_mb": 1024},
    }
    honest = {"id": "honest", "language": "python", "code": "def f():\n    return [1.5]\n"}
    honest["tests"] = one_call
    with running.http(timeout_s=170) as client:
        response = client.post("/v1/code/score", json={"items": [hostile, honest]})
    assert response.status_code == 200, response.text
    bad, good = response.json()["results"]
    assert good["reward"] == 1.0 and good["error"] is None
    assert bad["error"] is None, bad["error"]
    assert bad["reward"] == 0.0 and bad["details"]["tests"][0]["verdict"] == "wrong_answer"


@pytest.mark.slow
def test_hostile_comparisons_as_large_as_their_expected_values_delay_no_honest_item(
    service: Callable[..., RunningService], redis_server: RedisServer, key_prefix: str
) -> None:
    # Where the expected value is as large as the reply, no size bound skips the work: a
    # million-element return value that differs from a million floats only in its last
    # element, and two million lines of stdout compared with a tolerance, each cost about a
    # second of CPU to compare, and their items' parse, validation and the inspector's copy
    # more. On the worker's event loop that stopped its heartbeats past the visibility timeout
    # (2 s here: the GIL-holding parts that stay, in a thread, last a tenth of that on a loaded
    # host), the other worker claimed the batch again and, with one delivery allowed, every
    # item of it was dead-lettered. Two worker processes, a real Redis queue.
    running = two_code_workers(service, redis_server, key_prefix, "2", "0.1")
    n = 1_000_000
    limits = {"timeout_s": 30.0, "max_output_bytes": CodeConfig().max_output_bytes}
    reply = {
        "id": "reply",
        "language": "python",
        "code": f"def f():\n    return [1] * {n - 1} + [2]\n",
        "tests": {"kind": "function", "entry_point": "f", "cases": [{"expected": [1.0] * n}]},
        "limits": {**limits, "memory_mb": 1024},
    }
    stdout = {
        "id": "stdout",
        "language": "python",
        "code": f"import sys\nsys.stdout.write('1.50\\n' * {2 * n} + '9\\n')\n",
        "tests": {"kind": "stdio", "cases": [{"stdin": "", "stdout": "1.5\n" * (2 * n + 1)}]},
        "limits": limits,
        "options": {"float_tolerance": 1e-6},
    }
    honest = {"id": "honest", "language": "python", "code": "def f():\n    return [1.5]\n"}
    honest["tests"] = {"kind": "function", "entry_point": "f", "cases": [{"expected": [1.5]}]}
    with running.http(timeout_s=170) as client:
        response = client.post("/v1/code/score", json={"items": [reply, stdout, honest]})
    assert response.status_code == 200, response.text
    *hostile, good = response.json()["results"]
    assert good["reward"] == 1.0 and good["error"] is None, [r["error"] for r in [*hostile, good]]
    for bad in hostile:
        assert bad["error"] is None, (bad["id"], bad["error"])
        assert bad["reward"] == 0.0 and bad["details"]["tests"][0]["verdict"] == "wrong_answer"
