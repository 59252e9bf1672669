"""nccl-tests logs as other versions, options and launchers print them (issue 9): each variant is the shipped
all-reduce log rewritten into that format, and must read as the same measurements, or be refused with a line
that says why. The formats are nccl-tests' own (NVIDIA/nccl-tests src/util.cu writeResultHeader,
writeBenchmarkLineBody; src/common.cu@0f8c785a for versions before 2.11) and the launchers'."""

from __future__ import annotations

import json
import re
from pathlib import Path

from hostile import assert_refused, run

LOG = Path(__file__).parent.parent / "hardware" / "measured" / "h100-8gpu-together-nccl-tests" / "all_reduce_ring.out"


def imported(path, *args) -> dict:
    outcome = run(["import", "nccl-tests", str(path), *args])
    assert outcome.code == 0, str(outcome)
    return json.loads(outcome.stdout)


def measured(path, *args) -> list[tuple]:
    """(bytes, placement, time, algbw, busbw) of every row."""
    return [(r["bytes"], r["placement"], r["time_s"], r["algbw_bytes_per_s"], r["busbw_bytes_per_s"])
            for r in imported(path, *args)["runs"][0]["rows"]]


def write(tmp_path, lines, name="all_reduce_ring.out") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def lines() -> list[str]:
    return LOG.read_text().splitlines()


def rows_rewritten(change) -> list[str]:
    """The log with every data row's columns (size, count, type, redop, root, 8 measurements) given to ``change``."""
    out = []
    for line in lines():
        if line.strip() and line.split()[0].isdigit():
            line = "  ".join(change(line.split()))
        out.append(line)
    return out


PLAIN = None


def plain() -> list[tuple]:
    global PLAIN
    PLAIN = PLAIN or measured(LOG)
    return PLAIN


def test_nccl_debug_and_launcher_lines_are_not_the_table(tmp_path):
    """NCCL_DEBUG=INFO / WARN lines (NVIDIA/nccl src/debug.cc: 'host:pid:tid [dev] NCCL INFO ...'), a container
    runtime's notice and nccl-tests' own '-R 2' notice, before, inside and after the table."""
    noise = ["gpu-dp-2jvzl-pqq7p:1595114:1595114 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.5<0>",
             "gpu-dp-2jvzl-pqq7p:1595114:1595114 [0] NCCL INFO Channel 00/24 : 0 1 2 3 4 5 6 7",
             "gpu-dp-2jvzl-pqq7p:1595114:1595114 [0] NCCL INFO Ring 00 : 7 -> 0 -> 1 1 2 3 4 5 6 7",
             "gpu-dp-2jvzl-pqq7p:1595114:1595200 [3] NCCL WARN NET/IB : Got async event : port error",
             "pyxis: importing docker image: nvcr.io/nvidia/pytorch:25.01-py3",
             "Option -R 2 is not supported, Defaulting to local registration"]
    text = lines()
    first_row = next(i for i, line in enumerate(text) if line.strip() and line.split()[0].isdigit())
    noisy = noise + text[:first_row + 3] + noise + text[first_row + 3:] + noise
    assert measured(write(tmp_path, noisy)) == plain()


def test_nccl_says_which_algorithm_the_environment_set(tmp_path):
    """NCCL_DEBUG=INFO prints 'NCCL_ALGO set by environment to X' (src/graph/tuning.cc L372): its word names the run's
    algorithm over the file name's; a list or an exclusion leaves NCCL a choice ('auto')."""
    def with_info(value):
        return write(tmp_path, ["host:1:1 [0] NCCL INFO NCCL_ALGO set by environment to " + value] + lines(), "log.out")

    assert imported(with_info("Tree"))["runs"][0]["algorithm"] == "tree"
    assert imported(with_info("^NVLS"))["runs"][0]["algorithm"] == "auto"
    assert_refused(run(["import", "nccl-tests", str(with_info("Spiral"))]), "log.out:1: NCCL_ALGO: unknown algorithm")


def test_a_run_under_nvls_prices_what_the_tuner_gives_each_op(tmp_path):
    """NCCL_ALGO=NVLS: an all-gather takes NCCL's NVLS all-gather (the tuner has it); an all-to-all takes no
    collective algorithm (it runs as sends), so it is priced as without NCCL_ALGO."""
    gather = LOG.with_name("all_gather_ring.out").read_text()
    nvls = write(tmp_path, gather.splitlines(), "all_gather_nvls.out")
    rows = json.loads(run(["validate", str(nvls), "--hardware", "h100-sxm", "--json"]).stdout)["rows"]
    assert {r["assumed"].split("/")[0] for r in rows} == {"nvls"}
    alltoall = [line.replace("all_gather_perf", "alltoall_perf") for line in gather.splitlines()]
    as_nvls, as_auto = write(tmp_path, alltoall, "alltoall_nvls.out"), write(tmp_path, alltoall, "alltoall.out")
    times = [[r["predicted_s"] for r in json.loads(run(["validate", str(p), "--hardware", "h100-sxm", "--json"]).stdout)
              ["rows"]] for p in (as_nvls, as_auto)]
    assert times[0] == times[1]


def test_launcher_timestamps_and_mpich_ranks_are_stripped(tmp_path):
    for prefix in ("2025-03-05T22:09:44.123456789Z ", "Mar 05 22:09:44 ", "[0] ", "2025-03-05T22:09:44Z 0: ",
                   "node01: "):  # ... pdsh, DeepSpeed's multi-node launcher
        assert measured(write(tmp_path, [prefix + line for line in lines()])) == plain(), prefix


def test_an_mpi_build_names_its_binary_with_a_suffix(tmp_path):
    """make MPI=1 NAME_SUFFIX=_mpi builds all_reduce_perf_mpi (nccl-tests README, 'Build')."""
    path = write(tmp_path, [line.replace("all_reduce_perf", "all_reduce_perf_mpi") for line in lines()], "log.out")
    assert imported(path)["runs"][0]["collective"] == "all-reduce"


def test_old_versions_columns_read_the_same_numbers(tmp_path):
    """Before nccl-tests 2.11: rank lines without Group, no root column (all-reduce: size count type redop), the
    error as '%5.0le'; all-gather without redop either; all-to-all with a blank redop and in-place 'N/A'.
    Read from the end of the row by the header, each gives the shipped log's numbers (a read from the start
    would shift every column)."""
    def old(text, header, change):
        out = []
        for line in text:
            line = re.sub(r"(#\s+Rank\s+\d+)\s+Group\s+\d+", r"\1", line)
            if line.lstrip().startswith("#") and "size" in line and "count" in line:
                line = header
            out.append(line)
        return [("  ".join(change(line.split())) if line.strip() and line.split()[0].isdigit() else line)
                for line in out]

    def measurements(t):  # the 8 measurement columns, '#wrong' printed as '%5.0le'
        return [v if i not in (3, 7) else "0e+00" for i, v in enumerate(t[5:])]

    reduce_header = "#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error"
    path = write(tmp_path, old(lines(), reduce_header, lambda t: t[:4] + measurements(t)))
    assert imported(path)["runs"][0]["environment"]["world_size"] == 8  # the Group-less rank lines
    assert measured(path) == plain()
    gather_header = "#       size         count    type     time   algbw   busbw  error     time   algbw   busbw  error"
    assert measured(write(tmp_path, old(lines(), gather_header, lambda t: t[:3] + measurements(t)))) == plain()
    blank = "#       size         count    type    redop     time   algbw   busbw  error     time   algbw   busbw  error"
    path = write(tmp_path, old(lines(), blank, lambda t: t[:3] + measurements(t)[:7] + ["N/A"]))
    assert measured(path) == plain()


def test_nonzero_errors_are_refused_in_either_spelling(tmp_path):
    for wrong in ("3", "2e-07"):
        path = write(tmp_path, rows_rewritten(lambda t: t[:8] + [wrong] + t[9:]))
        assert_refused(run(["import", "nccl-tests", str(path)]), "wrong results")


def test_before_2_13_the_error_column_is_a_deviation_judged_as_nccl_tests_judged_it(tmp_path):
    """Before 2.13 the column is 'error': the largest deviation from the expected sum ('%5.0le'), which nccl-tests
    counted wrong above 1e-5 x (n - 1) for float (src/common.cu DeltaMaxValue): 2e-07 on 8 ranks is a correct run
    (read as the shipped log), 1e-03 is not."""
    header = "#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error"

    def old(delta):
        out = [header if line.lstrip().startswith("#") and "size" in line and "count" in line else line
               for line in lines()]
        return [("  ".join(t[:4] + [v if i not in (3, 7) else delta for i, v in enumerate(t[5:])])
                 if line.strip() and (t := line.split())[0].isdigit() else line) for line in out]

    assert measured(write(tmp_path, old("2e-07"))) == plain()
    assert_refused(run(["import", "nccl-tests", str(write(tmp_path, old("1e-03")))]), "tolerance for float on 8 ranks")


def test_per_iteration_columns_and_timestamps(tmp_path):
    """-I 1 adds i_min i_max i_p99 i_cv% after each placement's #wrong; -S 1 ends each row with a timestamp."""
    header = ("#       size         count      type   redop    root     time   algbw   busbw  #wrong    i_min    i_max"
              "    i_p99    i_cv%     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv%")
    text = [header if re.match(r"#\s+size\s+count", line) else line for line in lines()]
    per_iter = [("  ".join(t[:9] + ["36.21", "40.32", "39.94", "1.85"] + t[9:] + ["36.66", "40.81", "40.44", "1.85"])
                 if line.strip() and (t := line.split())[0].isdigit() else line) for line in text]
    assert measured(write(tmp_path, per_iter)) == plain()
    stamped = [line + "  2025-03-05 22:09:44" if line.strip() and line.split()[0].isdigit() else line
               for line in lines()]
    assert measured(write(tmp_path, stamped)) == plain()


def test_cpu_launch_time_is_refused(tmp_path):
    """-C 1 reports the host's launch time in a 'cputime' column (util.cu: report_cputime ? "cputime" : "time")."""
    text = [line.replace(" time ", " cputime ") if re.match(r"#\s+size\s+count", line) else line for line in lines()]
    assert_refused(run(["import", "nccl-tests", str(write(tmp_path, text))]), "-C")


def test_parallel_groups_time_one_group(tmp_path):
    """NCCL_TESTS_SPLIT_MASK=0x7 on 2 x 8: eight groups (the rank lines' Group) of one rank per node, each
    reporting its own bandwidth (busbw = algbw x 2 (n - 1)/n = algbw for n = 2). The collective's world is one
    group: 2 x 1. The same rows under rank lines of one group of 16 are refused: busbw / algbw names n = 2."""
    def ranks(group_of):
        return [f"#  Rank {r:2d} Group {group_of(r):2d} Pid {4000 + r:6d} on {'node-a' if r < 8 else 'node-b'} "
                f"device {r % 8:2d} [0000:19:00] NVIDIA H100 80GB HBM3" for r in range(16)]

    def log(group_of):
        text = [line for line in lines() if not re.match(r"#\s+Rank", line)]
        at = next(i for i, line in enumerate(text) if "Using devices" in line) + 1
        text = text[:at] + ranks(group_of) + text[at:]
        return [("  ".join(t[:7] + [t[6]] + t[8:11] + [t[10]] + t[12:])
                 if line.strip() and (t := line.split())[0].isdigit() else line) for line in text]

    env = imported(write(tmp_path, log(lambda r: r % 8)))["runs"][0]["environment"]
    assert (env["world_size"], env["nodes"], env["gpus_per_node"], env["parallel_groups"]) == (2, 2, 1, 8)
    assert_refused(run(["import", "nccl-tests", str(write(tmp_path, log(lambda r: 0)))]), "busbw / algbw")


def test_programs_that_are_no_nccl_collective_are_refused(tmp_path):
    for program in ("hypercube_perf", "bisection_perf"):
        path = write(tmp_path, [line.replace("all_reduce_perf", program) for line in lines()], "log.out")
        assert_refused(run(["import", "nccl-tests", str(path)]), "no time model")


def test_op_is_taken_as_the_help_spells_it(tmp_path):
    headless = [line for line in lines() if "Collective test starting" not in line]
    path = write(tmp_path, [line.replace("all_reduce_perf", "x") for line in headless], "log.out")
    assert imported(path, "--op", "send/recv")["runs"][0]["collective"] == "send/recv"


def as_json(text_lines, *, env=(), key="time", wrong=0.0) -> dict:
    """A text log as nccl-tests -J writes it (src/util.cu, JSON_FILE_VERSION 2): args, env, config.devices, and one
    result per row with out_of_place / in_place {time, alg_bw, bus_bw, nwrong}."""
    devices = [{"rank": int(m.group(1)), "group": int(m.group(2)), "pid": 1, "hostname": m.group(3),
                "device": int(m.group(4)), "device_hex": "0000:29:00", "device_info": m.group(5)}
               for line in text_lines
               if (m := re.match(r"#\s+Rank\s+(\d+)\s+Group\s+(\d+)\s+Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d+)\s+\S+\s+(.*)$",
                                 line))]
    results = []
    for line in text_lines:
        if line.strip() and (t := line.split())[0].isdigit():
            placed = [{key: float(t[i]), "alg_bw": float(t[i + 1]), "bus_bw": float(t[i + 2]), "nwrong": wrong}
                      for i in (5, 9)]
            results.append({"size": int(t[0]), "count": int(t[1]), "type": t[2], "redop": t[3], "root": t[4],
                            "out_of_place": placed[0], "in_place": placed[1], "actual_iterations": 20,
                            "experiment_name": ""})
    return {"version": 2, "start_time": "2025-03-05 22:09:44", "args": ["./build/all_reduce_perf", "-g", "8", "-J", "x"],
            "env": list(env), "nccl_version": 22602,
            "config": {"nthreads": 1, "ngpus": 8, "devices": devices}, "results": results,
            "out_of_bounds": {"count": 0, "okay": "true"}}


def test_nccl_tests_own_json_reads_as_its_log(tmp_path):
    """-J FILE: the same rows, ranks and program as the text log; NCCL_ALGO from the run's environment (a list
    or an exclusion leaves the choice to NCCL); -C's cpu_time and nonzero nwrong refused."""
    path = tmp_path / "ar.json"
    path.write_text(json.dumps(as_json(lines(), env=["NCCL_ALGO=Ring", "NCCL_DEBUG=WARN"])))
    doc = imported(path)
    assert measured(path) == plain() and doc["environment"]["world_size"] == 8
    assert doc["runs"][0]["algorithm"] == "ring" and doc["source"]["nccl"] == "2.26.2"
    path.write_text(json.dumps(as_json(lines(), env=["NCCL_ALGO=^NVLS"])))
    assert imported(path)["runs"][0]["algorithm"] == "auto"
    path.write_text(json.dumps(as_json(lines(), key="cpu_time")))
    assert_refused(run(["import", "nccl-tests", str(path)]), "-C")
    path.write_text(json.dumps(as_json(lines(), wrong=4.0)))
    assert_refused(run(["import", "nccl-tests", str(path)]), "wrong results")
    path.write_text(json.dumps(dict(as_json(lines()), results=[])))
    assert_refused(run(["import", "nccl-tests", str(path)]), "'results' rows")


def test_a_first_line_in_brackets_is_still_a_log(tmp_path):
    """Open MPI's and pyxis' own lines open many logs ('[node01:12345] mca_base_component_repository_open: ...')."""
    for first in ("[node01:12345] mca_base_component_repository_open: unable to open mca_btl_openib",
                  "{pyxis} importing image"):
        assert measured(write(tmp_path, [first] + lines())) == plain()


def test_rows_and_headers_that_disagree_are_refused(tmp_path):
    """A stray token inside or after a row, a column no nccl-tests version prints, a bandwidth no link has: one
    line each, never numbers read from the wrong column."""
    text = lines()
    at = next(i for i, line in enumerate(text) if line.strip() and line.split()[0] == "134217728")
    for bad in (text[at].replace("sum", "sum 3", 1), text[at] + "  7"):
        assert_refused(run(["import", "nccl-tests", str(write(tmp_path, text[:at] + [bad] + text[at + 1:]))]),
                       "columns where its header has")
    header = [line + "   extra" if re.match(r"#\s+size\s+count", line) else line for line in text]
    assert_refused(run(["import", "nccl-tests", str(write(tmp_path, header))]), "'extra'")
    t = text[at].split()
    huge = "  ".join(t[:6] + ["1e308"] + t[7:])
    assert_refused(run(["import", "nccl-tests", str(write(tmp_path, text[:at] + [huge] + text[at + 1:]))]),
                   "no measurement")


def test_a_table_of_one_placement_reads_which_its_banner_names(tmp_path):
    """nccl-tests' trace replay times in-place only: a header with one 'time algbw busbw #wrong' group under an
    'in-place' banner is in-place; its blank out-of-place columns (util.cu writeBenchMarkLineNullBody: 32 spaces
    under a header of both groups) read as in-place rows alone. Either way the times are the log's in-place ones."""
    inplace = [(b, p, t, a, w) for b, p, t, a, w in plain() if p == "in-place"]
    banner = next(i for i, line in enumerate(lines()) if "out-of-place" in line)
    header = {banner: "#" + " " * 64 + "in-place",
              banner + 1: "#       size         count      type   redop    root     time   algbw   busbw  #wrong",
              banner + 2: "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"}
    one = [header.get(i, "  ".join(line.split()[:5] + line.split()[-4:])
                      if line.strip() and line.split()[0].isdigit() else line) for i, line in enumerate(lines())]
    assert measured(write(tmp_path, one)) == inplace
    blank = ["  ".join(line.split()[:5]) + " " * 32 + "  ".join(line.split()[-4:])
             if line.strip() and line.split()[0].isdigit() else line for line in lines()]
    assert measured(write(tmp_path, blank)) == inplace
