# What a user does without mqd: attach gdb to an MPICH ch3 rank and walk its posted and
# unexpected receive queues in gdb's Python (`gdb -batch -p PID -x scripts/gdb-walk-ch3.py`).
# scripts/bench-attach times it against `mqd dump` on the same process. Prints one line:
#   gdb-walk posted=N unexpected=M checksum=C
# (the checksum adds every request's tag and source, so both tools can be checked to
# have read the same queues).
import gdb


def walk(head_name):
    count = 0
    checksum = 0
    request = gdb.parse_and_eval(head_name)
    while int(request) != 0:
        parts = request["dev"]["match"]["parts"]
        checksum += int(parts["tag"]) + int(parts["rank"])
        count += 1
        request = request["next"]
    return count, checksum


posted, posted_sum = walk("recvq_posted_head")
unexpected, unexpected_sum = walk("recvq_unexpected_head")
print(
    "gdb-walk posted=%d unexpected=%d checksum=%d"
    % (posted, unexpected, posted_sum + unexpected_sum)
)
