# scripts/gdb/lionet.py: LioNet fibers in gdb, for a live process (gdb -p PID) and a core file.
#
#   (gdb) source /usr/share/lionet/gdb/lionet.py      (or scripts/gdb/lionet.py in a checkout)
#   (gdb) lionet fibers            every fiber: id, name, state, wait kind, worker
#   (gdb) lionet bt ID             the backtrace of fiber ID (parked or runnable)
#   (gdb) lionet bt all            the backtrace of every fiber that is not running
#
# No debug info is needed: the program describes its own fiber records in the C symbol
# `lionet_debug_info` (lionet/fiber/debug_info.h: offsets, the list of registry shards, the
# names of states and wait kinds), and this script reads memory only. A running fiber's frames
# are those of its worker thread (`thread apply all bt`).
#
# How a parked fiber's frames are shown: its context was saved by LioNet's switch as
# [r15 r14 r13 r12 rbx rbp return-address] at its stack pointer. An unwinder registered here
# makes gdb take those registers as the caller of the selected thread's innermost frame, and
# gdb's own unwinding (DWARF CFI, symbols, file:line where debug info exists) does the rest.
# Registers cannot be written in a core file, which is why this is an unwinder and not a
# `set $rsp = ...` around `bt`. x86-64 only (the layout above is LioNet's own switch there).
import gdb
from gdb.unwinder import Unwinder

_MAGIC = 0x4C4E4442
_VERSION = 1
_FIELDS = [
    "magic", "version", "fiber_id", "fiber_state", "fiber_fctx", "fiber_name", "fiber_reg_next",
    "fiber_worker", "fiber_wait_word", "fiber_wait_object", "state_mask", "string_data",
    "string_size", "shard_head", "shard_next", "worker_index", "n_states", "n_wait_kinds",
]  # uint32 each, in debug_info.h's order; then const char* state_names[8], wait_names[32], shards


def _read(addr, size):
    return int.from_bytes(gdb.selected_inferior().read_memory(addr, size).tobytes(), "little")


def _u64(addr):
    return _read(addr, 8)


def _cstring(addr, limit=256):
    if addr == 0:
        return ""
    data = gdb.selected_inferior().read_memory(addr, limit).tobytes()
    return data.split(b"\0", 1)[0].decode("utf-8", "replace")


def _info():
    try:
        base = int(gdb.parse_and_eval("(long)&lionet_debug_info"))
    except gdb.error as e:
        raise gdb.GdbError("lionet: no symbol lionet_debug_info in this program (not a LioNet program, "
                           "or one older than the gdb extension): %s" % e)
    info = {}
    for i, name in enumerate(_FIELDS):
        info[name] = _read(base + 4 * i, 4)
    if info["magic"] != _MAGIC:
        raise gdb.GdbError("lionet: lionet_debug_info has the wrong magic 0x%x" % info["magic"])
    if info["version"] != _VERSION:
        raise gdb.GdbError("lionet: lionet_debug_info version %d; this script reads version %d"
                           % (info["version"], _VERSION))
    p = base + 4 * len(_FIELDS)
    p = (p + 7) & ~7
    info["state_names"] = [_cstring(_u64(p + 8 * i)) for i in range(8)]
    p += 8 * 8
    info["wait_names"] = [_cstring(_u64(p + 8 * i)) for i in range(32)]
    p += 8 * 32
    info["shards"] = _u64(p)
    return info


class Fiber(object):
    pass


def _fibers(info):
    """Every listed fiber, shard by shard (bounded, in case memory is damaged)."""
    out = []
    shard = info["shards"]
    seen_shards = 0
    while shard and seen_shards < 100000:
        seen_shards += 1
        f = _u64(shard + info["shard_head"])
        n = 0
        while f and n < 10000000:
            n += 1
            fib = Fiber()
            fib.addr = f
            fib.id = _u64(f + info["fiber_id"])
            word = _read(f + info["fiber_state"], 4)
            st = word & info["state_mask"]
            fib.state = info["state_names"][st] if st < info["n_states"] else "state %d" % st
            name_ptr = _u64(f + info["fiber_name"] + info["string_data"])
            name_len = _u64(f + info["fiber_name"] + info["string_size"])
            fib.name = _cstring(name_ptr, min(name_len, 200) + 1)[:name_len] if name_len else ""
            wait = _u64(f + info["fiber_wait_word"])
            kind = wait & 0xFF
            fib.wait = ""
            if fib.state == "parked":
                fib.wait = info["wait_names"][kind] if kind < info["n_wait_kinds"] else "kind %d" % kind
                if kind in (1, 2):  # fd read / fd write: the fd is the argument
                    fib.wait += " (fd %d)" % (wait >> 32)
            worker = _u64(f + info["fiber_worker"])
            fib.worker = -1
            if worker and info["worker_index"] != 0xFFFFFFFF:
                fib.worker = _read(worker + info["worker_index"], 4)
            fib.fctx = _u64(f + info["fiber_fctx"])
            if fib.state != "done":
                out.append(fib)
            f = _u64(f + info["fiber_reg_next"])
        shard = _u64(shard + info["shard_next"])
    out.sort(key=lambda x: x.id)
    return out


class _FrameId(object):
    def __init__(self, sp, pc):
        self.sp = sp
        self.pc = pc


class _FiberUnwinder(Unwinder):
    """Gives the selected thread's innermost frame the chosen fiber's saved registers as its
    caller's, while `regs` is set (only for the duration of one `lionet bt`)."""

    def __init__(self):
        super(_FiberUnwinder, self).__init__("lionet-fiber")
        self.regs = None

    def __call__(self, pending_frame):
        if self.regs is None or pending_frame.level() != 0:
            return None
        sp = pending_frame.read_register("rsp")
        pc = pending_frame.read_register("rip")
        # The innermost frame's id gets stack address 0: gdb stops a backtrace whose next frame
        # looks inner to the one before it ("previous frame inner to this frame"), and the
        # fiber's stack may lie anywhere relative to this thread's.
        ui = pending_frame.create_unwind_info(_FrameId(gdb.Value(0).cast(sp.type), pc))
        for reg, value in self.regs.items():
            t = sp.type if reg in ("rsp", "rbp") else (pc.type if reg == "rip" else
                                                        pending_frame.read_register(reg).type)
            ui.add_saved_register(reg, gdb.Value(value).cast(t))
        return ui


_unwinder = _FiberUnwinder()
gdb.unwinder.register_unwinder(None, _unwinder, replace=True)


def _saved_registers(fctx):
    w = [_u64(fctx + 8 * i) for i in range(7)]
    return {"r15": w[0], "r14": w[1], "r13": w[2], "r12": w[3], "rbx": w[4], "rbp": w[5],
            "rip": w[6], "rsp": fctx + 56}


def _describe(frame, level):
    pc = frame.pc()
    name = frame.name() or "??"
    sal = frame.find_sal()
    where = ""
    if sal.symtab is not None and sal.line:
        where = " at %s:%d" % (sal.symtab.filename, sal.line)
    else:
        solib = gdb.solib_name(pc)
        if solib:
            where = " from %s" % solib
    return "#%-2d 0x%016x in %s%s" % (level, pc, name, where)


def _backtrace(fib, limit=64):
    if fib.state not in ("parked", "runnable") or not fib.fctx:
        return ["    (%s: no saved context; a running fiber's frames are its worker thread's)" % fib.state]
    if gdb.selected_thread() is None:
        return ["    (no thread selected)"]
    _unwinder.regs = _saved_registers(fib.fctx)
    gdb.invalidate_cached_frames()
    lines = []
    try:
        frame = gdb.newest_frame().older()  # the thread's own innermost frame is skipped
        level = 0
        while frame is not None and level < limit:
            lines.append("    " + _describe(frame, level))
            level += 1
            frame = frame.older()
    except gdb.error as e:
        lines.append("    (unwinding stopped: %s)" % e)
    finally:
        _unwinder.regs = None
        gdb.invalidate_cached_frames()
    return lines


def _header(fib):
    name = ' "%s"' % fib.name if fib.name else ""
    worker = "worker %d" % fib.worker if fib.worker >= 0 else "not started"
    wait = ", waiting %s" % fib.wait if fib.wait else ""
    return "fiber %d%s: %s%s, %s" % (fib.id, name, fib.state, wait, worker)


class LionetCommand(gdb.Command):
    """LioNet fibers: lionet fibers | lionet bt ID | lionet bt all"""

    def __init__(self):
        super(LionetCommand, self).__init__("lionet", gdb.COMMAND_STACK, gdb.COMPLETE_NONE, True)


class LionetFibers(gdb.Command):
    """List every LioNet fiber: id, name, state, wait kind, worker."""

    def __init__(self):
        super(LionetFibers, self).__init__("lionet fibers", gdb.COMMAND_STACK)

    def invoke(self, arg, from_tty):
        fibers = _fibers(_info())
        gdb.write("%d fibers\n" % len(fibers))
        for fib in fibers:
            gdb.write(_header(fib) + "\n")


class LionetBt(gdb.Command):
    """Backtrace of a LioNet fiber: lionet bt ID, or lionet bt all."""

    def __init__(self):
        super(LionetBt, self).__init__("lionet bt", gdb.COMMAND_STACK)

    def invoke(self, arg, from_tty):
        arg = arg.strip()
        if not arg:
            raise gdb.GdbError("usage: lionet bt ID | lionet bt all")
        fibers = _fibers(_info())
        if arg != "all":
            try:
                want = int(arg, 0)
            except ValueError:
                raise gdb.GdbError("lionet bt: %r is not a fiber id (or 'all')" % arg)
            fibers = [f for f in fibers if f.id == want]
            if not fibers:
                raise gdb.GdbError("lionet bt: no fiber %d (see lionet fibers)" % want)
        for fib in fibers:
            gdb.write(_header(fib) + "\n")
            for line in _backtrace(fib):
                gdb.write(line + "\n")
            gdb.write("\n")


LionetCommand()
LionetFibers()
LionetBt()
