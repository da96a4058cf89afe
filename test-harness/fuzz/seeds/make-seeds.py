#!/usr/bin/env python3
"""Writes the fuzz targets' seed inputs (checked in; rerun to regenerate):

  dll/     layout and architecture picks for the example image, no writes, and one
           type-table edit of each kind per layout
  elf/     a small C program with structs, unions, enums and typedefs, built with
           gcc -g as DWARF 5 and DWARF 4 (needs gcc)
  core/    hand-made ELF cores, 64-bit little-endian and 32-bit big-endian: NT_PRSTATUS,
           NT_AUXV and NT_FILE notes and two small loads; and gdb's gcore of a real
           process (the stack program below), every note kept and each load cut to its
           first 256 bytes (needs gcc and gdb)
  tables/  starter images: an MPIR process table of two ranks, both byte orders and
           widths, and one with MPI2DD's symbols present
  stack/   a program stopped two calls under a function named MPI_Recv, at -O0 and -O1
           (needs gcc and gdb): its file, registers and 512 bytes of stack
  records/ a rank's memory holding the hang recorder's region (mapped at 0x100000): the
           header, three procedure names, the field offsets and four thread slots (in
           MPI_Recv, MPI_Bcast, MPI_Sendrecv, and one caught mid-write), four communicators
           (the world, a topology's row, one mid-write, an intercommunicator), message
           counts and requests

Usage: test-harness/fuzz/seeds/make-seeds.py
"""
import os
import struct
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    os.makedirs(os.path.join(HERE, target), exist_ok=True)
    with open(os.path.join(HERE, target, name), "wb") as f:
        f.write(data)


def dll():
    for layout in range(4):
        for arch in range(4):
            write("dll", f"layout{layout}-arch{arch}", bytes([layout, arch, 0]))
        # One type-table edit of each kind (remove a type, remove a field, move a field,
        # resize a type, rename a type) on some type of the table; see edit_types.
        for op in range(5):
            name = 7 * op + layout
            edit = struct.pack("<BHBBHB", 1, name, op, 1, 40 + op, op)
            write("dll", f"layout{layout}-types{op}", bytes([layout, 0]) + edit)


PROGRAM = r"""
#include <stddef.h>
struct node { int key; struct node *next; };
typedef struct node node_t;
union number { int i; double d; unsigned char bytes[8]; };
enum color { RED, GREEN, BLUE };
struct inner { int i; long l; };
struct outer {
    int first;
    struct inner in;
    union { int u_int; char c; };
    struct { int x; int y; } named;
    struct { struct { short deep; }; };
    char tail[4];
};
typedef struct outer outer_t;
typedef const volatile outer_t outer3_t;
struct opaque;
struct opaque *the_opaque;
node_t head;
union number num;
enum color col;
outer3_t *op;
int main_global = 1;
int main(void) { return head.key + main_global; }
"""


def elf():
    with tempfile.TemporaryDirectory() as tmp:
        source = os.path.join(tmp, "types.c")
        with open(source, "w") as f:
            f.write(PROGRAM)
        for dwarf in ("5", "4"):
            out = os.path.join(tmp, "prog")
            subprocess.run(["gcc", "-g", f"-gdwarf-{dwarf}", "-O0", "-o", out, source],
                           check=True)
            subprocess.run(["strip", "--strip-unneeded", "--keep-symbol=main",
                            "--keep-symbol=main_global", "--keep-section=.debug_*", out],
                           check=True)
            with open(out, "rb") as f:
                write("elf", f"types-dwarf{dwarf}", f.read())


def core(is_64, little):
    e = "<" if little else ">"
    word = "Q" if is_64 else "I"

    def note(name, kind, desc):
        name = name + b"\0"
        out = struct.pack(e + "III", len(name), len(desc), kind) + name
        out += b"\0" * (-len(out) % 4) + desc
        return out + b"\0" * (-len(out) % 4)

    prstatus_size = 336 if is_64 else 144
    prstatus = bytearray(prstatus_size)
    struct.pack_into(e + "h", prstatus, 12, 6)  # pr_cursig: SIGABRT
    struct.pack_into(e + "i", prstatus, 32 if is_64 else 24, 4242)  # pr_pid
    auxv = struct.pack(e + word * 6, 6, 4096, 9, 0x401000, 0, 0)  # AT_PAGESZ, AT_ENTRY
    path = b"/usr/bin/true\0"
    files = struct.pack(e + word * 2, 1, 4096)
    files += struct.pack(e + word * 3, 0x400000, 0x401000, 0) + path
    notes = note(b"CORE", 1, bytes(prstatus)) + note(b"CORE", 6, auxv)
    notes += note(b"CORE", 0x46494C45, files)
    loads = [(0x400000, b"\x7fELF" + bytes(60), 0x1000), (0x7ffd0000, bytes(range(64)), 64)]
    ehsize, phsize = (64, 56) if is_64 else (52, 32)
    phnum = 1 + len(loads)
    notes_at = ehsize + phsize * phnum
    head = b"\x7fELF" + bytes([2 if is_64 else 1, 1 if little else 2, 1]) + bytes(9)
    head += struct.pack(e + "HHI", 4, 62 if is_64 else 3, 1)
    head += struct.pack(e + word * 3, 0, ehsize, 0)
    head += struct.pack(e + "IHHHHHH", 0, ehsize, phsize, phnum, 0, 0, 0)

    def ph(kind, flags, offset, vaddr, filesz, memsz):
        if is_64:
            return struct.pack(e + "IIQQQQQQ", kind, flags, offset, vaddr, 0, filesz, memsz, 4)
        return struct.pack(e + "IIIIIIII", kind, offset, vaddr, 0, filesz, memsz, flags, 4)

    out = head + ph(4, 0, notes_at, 0, len(notes), 0)
    data_at = notes_at + len(notes)
    for vaddr, data, memsz in loads:
        out += ph(1, 6, data_at, vaddr, len(data), memsz)
        data_at += len(data)
    out += notes + b"".join(d for _, d, _ in loads)
    write("core", f"core{'64' if is_64 else '32'}-{'le' if little else 'be'}", out)


def real_core():
    """gcore of the stack program stopped in inner(), shrunk: headers and notes as gdb
    wrote them, each load's file bytes cut to 256 (the rest reads as zeros)."""
    keep = 256
    with tempfile.TemporaryDirectory() as tmp:
        source = os.path.join(tmp, "stack.c")
        with open(source, "w") as f:
            f.write(STACK_PROGRAM)
        prog = os.path.join(tmp, "prog")
        subprocess.run(["gcc", "-g", "-O1", "-o", prog, source], check=True)
        dump = os.path.join(tmp, "core")
        subprocess.run(["gdb", "-nx", "-batch", "-ex", "break inner", "-ex", "run",
                        "-ex", f"gcore {dump}", prog], check=True, capture_output=True)
        with open(dump, "rb") as f:
            image = f.read()
    assert image[:5] == b"\x7fELF\x02" and image[5] == 1, "a 64-bit little-endian core"
    phoff, = struct.unpack_from("<Q", image, 32)
    phsize, phnum = struct.unpack_from("<HH", image, 54)
    headers = bytearray(image[:phoff + phsize * phnum])
    struct.pack_into("<Q", headers, 40, 0)  # e_shoff: gdb's section headers are not kept
    struct.pack_into("<HHH", headers, 58, 0, 0, 0)  # e_shentsize, e_shnum, e_shstrndx
    body = b""
    at = len(headers)
    for i in range(phnum):
        ph = phoff + i * phsize
        kind, = struct.unpack_from("<I", image, ph)
        offset, = struct.unpack_from("<Q", image, ph + 8)
        filesz, = struct.unpack_from("<Q", image, ph + 32)
        size = filesz if kind == 4 else min(filesz, keep)
        body += image[offset:offset + size]
        struct.pack_into("<Q", headers, ph + 8, at)  # p_offset
        struct.pack_into("<Q", headers, ph + 32, size)  # p_filesz
        at += size
    write("core", "gcore64-le", bytes(headers) + body)


STACK_PROGRAM = r"""
static volatile int sink;
__attribute__((noinline)) static int inner(int x) { sink = x; return sink + 1; }
static inline int twice(int x) { return inner(x) + inner(x + 1); }
__attribute__((noinline)) int MPI_Recv(void *buf, int count, int datatype, int source,
                                       int tag, int comm, void *status) {
    return twice(count + source + tag + datatype + comm) + (buf != status);
}
int main(void) { return MPI_Recv(0, 1, 2, 3, 4, 5, 0); }
"""


def stack():
    """A program stopped in inner() under MPI_Recv: its file, registers and stack."""
    with tempfile.TemporaryDirectory() as tmp:
        source = os.path.join(tmp, "stack.c")
        with open(source, "w") as f:
            f.write(STACK_PROGRAM)
        out = os.path.join(tmp, "prog")
        for opt, name in (("-O1", "mpi-recv-O1"), ("-O0", "mpi-recv-O0")):
            # Not PIE: the fuzz target maps the file at its link addresses.
            subprocess.run(["gcc", "-g", opt, "-no-pie", "-fno-omit-frame-pointer", "-o", out,
                            source], check=True)
            dump = os.path.join(tmp, "stack.bin")
            gdb = subprocess.run(
                ["gdb", "-nx", "-batch", "-ex", "break inner", "-ex", "run",
                 "-ex", "info registers", "-ex", f"dump binary memory {dump} $sp $sp+512",
                 out], check=True, capture_output=True, text=True).stdout
            values = {}
            for line in gdb.splitlines():
                parts = line.split()
                if len(parts) >= 2 and parts[1].startswith("0x"):
                    values[parts[0]] = int(parts[1], 16)
            # DWARF numbering: rax rdx rcx rbx rsi rdi rbp rsp r8-r15, then rip.
            names = ["rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp"]
            names += [f"r{i}" for i in range(8, 16)] + ["rip"]
            with open(out, "rb") as f:
                image = f.read()
            with open(dump, "rb") as f:
                memory = f.read()
            data = struct.pack("<I", len(image)) + image
            data += b"".join(struct.pack("<Q", values[n]) for n in names)
            data += struct.pack("<Q", values["rsp"]) + memory
            write("stack", name, data)


BASE = 0x100


def tables(little, pointer, mpi2dd=False):
    e = "<" if little else ">"
    p = "Q" if pointer == 8 else "I"
    memory = bytearray(0x400)

    def put(at, fmt, *values):
        struct.pack_into(e + fmt, memory, at, *values)

    strings = {}
    at = 0x200
    for s in (b"node0", b"/bin/a", b"node1", b"/bin/b", b"job aborted"):
        strings[s] = BASE + at
        memory[at:at + len(s)] = s
        at += len(s) + 1
    stride = (2 * pointer + 4 + pointer - 1) // pointer * pointer
    table = 0x100
    for i, (host, exe) in enumerate(((b"node0", b"/bin/a"), (b"node1", b"/bin/b"))):
        put(table + i * stride, p + p + "i", strings[host], strings[exe], 100 + i)
    put(0x00, p, BASE + table)  # MPIR_proctable
    put(0x08, "i", 2)  # MPIR_proctable_size
    put(0x10, "i", 1)  # MPIR_debug_state: spawned
    put(0x18, p, strings[b"job aborted"])  # MPIR_debug_abort_string
    memory[0x20:0x28] = b"lib.so\0\0"  # MPIR_dll_name
    flags = (0 if little else 1) | (0 if pointer == 8 else 2)
    # Symbols present: MPIR's five, MPIR_Breakpoint; MPI2DD's two when asked.
    present = 0b0_0111_1111 | (0b1_1000_0000 if mpi2dd else 0)
    name = f"mpir-{'le' if little else 'be'}{pointer * 8}" + ("-mpi2dd" if mpi2dd else "")
    write("tables", name, struct.pack("<BH", flags, present) + bytes(memory))


def records():
    base = 0x100000
    header_words, fields, slot = 34, 15, 128
    comm_fields, comm_slot = 13, 128
    absent = 1 << 63
    names = b"MPI_Bcast\0MPI_Recv\0MPI_Sendrecv\0"
    names_at = base + header_words * 8
    fields_at = (names_at + len(names) + 7) // 8 * 8
    table_at = fields_at + fields * 8
    comm_fields_at = table_at + 4 * slot
    comms_at = comm_fields_at + comm_fields * 8
    members_at = comms_at + 4 * comm_slot
    traffic_fields_at = members_at + 16
    traffic_at = traffic_fields_at + 5 * 8
    request_fields_at = traffic_at + 2 * 64
    requests_at = request_fields_at + 8 * 8

    def word(v):
        return absent if v is None else v & (2**64 - 1)

    def thread(tid, call, peer, tag, count, dtype, peer2=None, tag2=None, seq=4, coll=None):
        w = [seq, tid, 5, call, 0x44000000, word(peer), word(tag), count, dtype,
             word(peer2), word(tag2), absent, 0, word(coll), absent]
        return struct.pack("<16Q", *(w + [0] * (16 - len(w))))

    def comm(handle, flags, size, members, collectives, last, root=None, seq=2, lineage=0,
             sources=None, source_count=0, remote=None, remote_size=0):
        w = [seq, handle, flags, size, word(members), collectives, last, word(root), lineage,
             word(sources), source_count, word(remote), remote_size]
        return struct.pack("<16Q", *(w + [0] * (16 - len(w))))

    slots = (thread(101, 2, 1, 7, 16, 0x4C00080B)
             + thread(102, 1, 0, None, 4, 0x4C000405, coll=3)
             + thread(103, 3, 2, 3, 1, 0x4C000405, 0, 3)
             + thread(104, 2, -2, -1, 1, 0x4C000405, seq=5))
    # The world in world order, a row of two at 2 in the pool, one mid-write, an
    # intercommunicator from 0, 1 to 2, 3.
    comms = (comm(0x44000000, 1 | 8, 4, None, 3, 1, 0, lineage=1)
             + comm(0x84000002, 1, 2, 2, 1, 1, 1, lineage=0x5EED, sources=0, source_count=1)
             + comm(0x84000003, 1, 2, 0, 0, 0, seq=3)
             + comm(0x84000004, 1 | 4, 2, 0, 0, 0, lineage=0x1A7E, remote=2, remote_size=2))
    members = struct.pack("<4i", 0, 1, 2, 3)
    mask = 2**64 - 1

    def claim(key, lineage):
        # mqd_recording::traffic_claim
        x = key ^ ((((lineage << 32) | (lineage >> 32)) & mask) * 0x9E3779B97F4A7C15 & mask)
        x = ((x ^ (x >> 33)) * 0xFF51AFD7ED558CCD) & mask
        x = ((x ^ (x >> 33)) * 0xC4CEB9FE1A85EC53) & mask
        return (x ^ (x >> 33)) | 1

    def counts(peer, tag, lineage, sent, received):
        key = ((peer + 1) << 32) | tag
        return struct.pack("<8Q", claim(key, lineage), key, lineage, sent, received, 0, 0, 0)

    # Three messages of tag 7 sent to rank 1 on the world, two received; one of tag 3
    # from rank 0 on a row.
    traffic = counts(1, 7, 1, 3, 2) + counts(0, 3, 0x5EED, 0, 1)
    # An Irecv from rank 1, tag 7; a slot mid-write; a nonblocking collective, the
    # world's 4th, rooted at 0.
    requests = (struct.pack("<8Q", 2, 0xAC000001, 1 | 8, 0x44000000, 1, 7, 0, absent)
                + struct.pack("<8Q", 3, 0xAC000002, 1, 0x44000000, 0, 3, 0, absent)
                + struct.pack("<8Q", 2, 0xAC000003, 64 | 8, 0x44000000, 0, absent, 1, 4))
    # Version 7; MPI_Finalize entered (the last word).
    header = [int.from_bytes(b"mqd-rec\0", "little"), 7, header_words * 8, 1, 2, 4,
              names_at, len(names), 3, table_at, 4, slot, fields_at, fields, 0,
              comms_at, 4, comm_slot, comm_fields_at, comm_fields, members_at, 1024, 4,
              traffic_at, 2, 64, traffic_fields_at, 5,
              requests_at, 3, 64, request_fields_at, 8, 1]
    image = struct.pack(f"<{header_words}Q", *header) + names
    image += b"\0" * (fields_at - base - len(image))
    image += struct.pack(f"<{fields}Q", *[8 * i for i in range(fields)])
    image += slots
    image += struct.pack(f"<{comm_fields}Q", *[8 * i for i in range(comm_fields)])
    image += comms + members
    image += struct.pack("<5Q", 0, 8, 16, 24, 32) + traffic
    image += struct.pack("<8Q", *[8 * i for i in range(8)]) + requests
    write("records", "threads-mpich", image)


if __name__ == "__main__":
    dll()
    elf()
    for is_64, little in ((True, True), (False, False)):
        core(is_64, little)
    real_core()
    for little, pointer in ((True, 8), (False, 4), (True, 4), (False, 8)):
        tables(little, pointer)
    tables(True, 8, mpi2dd=True)
    stack()
    records()
