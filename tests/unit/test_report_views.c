/*
 * test_report_views.c - exact output of every view of ftrace-report (summary, folded stacks,
 * call graph, flame graph, info) and of the graph's options (depth, threshold, time range,
 * leaves, wall-clock column, colours), on trace files built with the ftr_enc_* API.
 */
#include "test_report_fixture.h"

#include <stdint.h>
#include <time.h>

TestSuite(views, .fini = fx_cleanup);

static char *example(enum frp_view v, const struct frp_opts *o)
{
    struct tb b;
    fx_example(&b);
    const char *path = fx_write(b.f.data, b.f.len);
    ftr_buf_free(&b.f);
    return fx_render(path, v, o, NULL, NULL);
}

/* ---------------------------------------------------------------- summary */

#define SUMMARY_HEAD                                                                               \
    "#  Total time    Self time       Calls      Average          Min          Max  Function\n"    \
    "# ===========  ===========  ==========  ===========  ===========  ===========  "              \
    "====================\n"

Test(views, summary_exact)
{
    char *text = example(FRP_SUMMARY, NULL);
    fx_expect(
        text,
        "# 5 functions, 6 calls\n" SUMMARY_HEAD
        "   164.724 us   164.724 us           1   164.724 us   164.724 us   164.724 us  xpread\n"
        "    12.206 us    10.486 us           1    12.206 us    12.206 us    12.206 us  main\n"
        "     3.800 us     3.800 us           1     3.800 us     3.800 us     3.800 us  worker\n"
        "     1.402 us     1.282 us           1     1.402 us     1.402 us     1.402 us  mid\n"
        "       438 ns       438 ns           2       219 ns       120 ns       318 ns  leaf\n");
    free(text);
}

Test(views, summary_sort_keys)
{
    struct frp_opts o = {.sort = FRP_SORT_CALLS};
    char *text = example(FRP_SUMMARY, &o);
    /* leaf has 2 calls, then the others by name */
    cr_assert_not_null(strstr(text, "  leaf\n"));
    const char *order[] = {"  leaf\n", "  main\n", "  mid\n", "  worker\n", "  xpread\n"};
    const char *at = text;
    for (int i = 0; i < 5; i++) {
        const char *p = strstr(at, order[i]);
        cr_assert_not_null(p, "%s not after the previous row:\n%s", order[i], text);
        at = p;
    }
    free(text);
    o.sort = FRP_SORT_SELF;
    text = example(FRP_SUMMARY, &o);
    cr_assert(strstr(text, "  main\n") < strstr(text, "  worker\n"));
    cr_assert(strstr(text, "  mid\n") < strstr(text, "  leaf\n"));
    free(text);
    o.sort = FRP_SORT_AVG; /* worker 3800 > mid 1402 > leaf 219 */
    text = example(FRP_SUMMARY, &o);
    cr_assert(strstr(text, "  worker\n") < strstr(text, "  mid\n"));
    cr_assert(strstr(text, "  mid\n") < strstr(text, "  leaf\n"));
    free(text);
    o.sort = FRP_SORT_MAX;
    text = example(FRP_SUMMARY, &o);
    cr_assert(strstr(text, "  xpread\n") < strstr(text, "  main\n"));
    free(text);
}

Test(views, summary_per_thread)
{
    struct frp_opts o = {.per_thread = 1};
    char *text = example(FRP_SUMMARY, &o);
    fx_expect(
        text,
        "# thread 4242 of pid 4242: ./prog\n" SUMMARY_HEAD
        "   164.724 us   164.724 us           1   164.724 us   164.724 us   164.724 us  xpread\n"
        "    12.206 us    10.486 us           1    12.206 us    12.206 us    12.206 us  main\n"
        "     1.402 us     1.282 us           1     1.402 us     1.402 us     1.402 us  mid\n"
        "       438 ns       438 ns           2       219 ns       120 ns       318 ns  leaf\n"
        "\n"
        "# thread 4243 (worker 1) of pid 4242: ./prog\n" SUMMARY_HEAD
        "     3.800 us     3.800 us           1     3.800 us     3.800 us     3.800 us  worker\n");
    free(text);
}

/* the summary when calls are still open at the end (the expected rows below, wider than the
 * line limit, are kept one a line: clang-format off) */
#define SUMMARY_HEAD_OPEN                                                                          \
    "#  Total time    Self time       Calls      Average          Min          Max    Open  "      \
    "Function\n"                                                                                   \
    "# ===========  ===========  ==========  ===========  ===========  ===========  ======  "      \
    "====================\n"

static char *summary_of(const struct tev *evs, size_t n, const struct frp_opts *o)
{
    struct tb b;
    tb_init(&b);
    tb_process(&b, 7, 1, 0, "./rec");
    tb_sites(&b, 7, 1, 1, fx_names, 5, 0x1000);
    tb_events(&b, 7, 7, evs, n);
    tb_done(&b);
    const char *path = fx_write(b.f.data, b.f.len);
    ftr_buf_free(&b.f);
    return fx_render(path, FRP_SUMMARY, o, NULL, NULL);
}

/* fib-like recursion: the nested calls are inside the outer one, counted once in total;
 * calls left open at the end are counted apart (column Open), never in the timings */
Test(views, summary_recursion_and_open_calls)
{
    static const struct tev evs[] = {E(MAIN, 0),    E(MID, 100),    E(MID, 200),  E(MID, 300),
                                     X(MID, 400),   X(MID, 600),    X(MID, 1100), E(LEAF, 2000),
                                     X(LEAF, 2500), E(XPREAD, 3000)};
    char *text = summary_of(evs, sizeof evs / sizeof *evs, NULL);
    /* mid: calls of 100, 400, 1000 ns; total 1000 (the outer one); self 100+300+600 */
    // clang-format off
    fx_expect(text,
              "# 4 functions, 4 calls; 2 calls still open at the end, not in the timings "
              "(column Open)\n" SUMMARY_HEAD_OPEN
              "     1.000 us     1.000 us           3       500 ns       100 ns     1.000 us       0  mid\n"
              "       500 ns       500 ns           1       500 ns       500 ns       500 ns       0  leaf\n"
              "            -            -           0            -            -            -       1  main\n"
              "            -            -           0            -            -            -       1  xpread\n");
    // clang-format on
    free(text);
}

/* The tracer stepped aside (an ASIDE special): the thread's events end there, and what comes
 * after (hooks it interrupted, finishing with a stale view: an EXIT of a frame that is not the
 * innermost, a new call) is not read; the frames open stay open, and nothing is mismatched */
Test(views, summary_aside_ends_the_thread)
{
    static const struct tev evs[] = {
        E(MAIN, 0),   E(MID, 100),    E(LEAF, 200),
        X(LEAF, 300), E(LEAF, 400),   {FTR_EV_SPECIAL, FTR_SP_ASIDE, 500, 0},
        X(MID, 600),  E(XPREAD, 700), X(XPREAD, 800)};
    char *text = summary_of(evs, sizeof evs / sizeof *evs, NULL);
    // clang-format off
    fx_expect(text,
              "# 3 functions, 1 call; 3 calls still open at the end, not in the timings "
              "(column Open)\n" SUMMARY_HEAD_OPEN
              "       100 ns       100 ns           1       100 ns       100 ns       100 ns       1  leaf\n"
              "            -            -           0            -            -            -       1  main\n"
              "            -            -           0            -            -            -       1  mid\n");
    // clang-format on
    free(text);
}

/* Mutex::Unlock's case: every closed call took >= 43 ns, one is still open when the trace
 * ends (its thread's last event is its entry): Min stays 43 ns, the open one is counted apart */
Test(views, summary_open_call_never_in_min_average_total)
{
    static const struct tev evs[] = {E(MAIN, 0),   E(LEAF, 100), X(LEAF, 143), E(LEAF, 200),
                                     X(LEAF, 250), E(LEAF, 300), X(LEAF, 360), E(LEAF, 400)};
    char *text = summary_of(evs, sizeof evs / sizeof *evs, NULL);
    // clang-format off
    fx_expect(text,
              "# 2 functions, 3 calls; 2 calls still open at the end, not in the timings "
              "(column Open)\n" SUMMARY_HEAD_OPEN
              "       153 ns       153 ns           3        51 ns        43 ns        60 ns       1  leaf\n"
              "            -            -           0            -            -            -       1  main\n");
    // clang-format on
    free(text);

    /* the same per thread: the note comes first, the column in every table */
    struct frp_opts o = {.per_thread = 1};
    text = summary_of(evs, sizeof evs / sizeof *evs, &o);
    // clang-format off
    fx_expect(text,
              "# 2 calls still open at the end, not in the timings (column Open)\n"
              "# thread 7 of pid 7: ./rec\n" SUMMARY_HEAD_OPEN
              "       153 ns       153 ns           3        51 ns        43 ns        60 ns       1  leaf\n"
              "            -            -           0            -            -            -       1  main\n");
    // clang-format on
    free(text);

    /* sorted by calls, by min: the open calls change nothing */
    o = (struct frp_opts){.sort = FRP_SORT_MAX};
    text = summary_of(evs, sizeof evs / sizeof *evs, &o);
    cr_assert(strstr(text, "  leaf\n") < strstr(text, "  main\n"), "%s", text);
    free(text);
}

/* A recursive function whose outer call is still open: its closed calls directly inside the
 * open one make its total (they are not inside one another) */
Test(views, summary_open_outer_call_of_recursion)
{
    static const struct tev evs[] = {E(MAIN, 0),  E(MID, 100), E(MID, 200), E(MID, 300),
                                     X(MID, 400), X(MID, 700), E(MID, 800), X(MID, 900)};
    char *text = summary_of(evs, sizeof evs / sizeof *evs, NULL);
    // clang-format off
    fx_expect(text,
              "# 2 functions, 3 calls; 2 calls still open at the end, not in the timings "
              "(column Open)\n" SUMMARY_HEAD_OPEN
              "       600 ns       600 ns           3       233 ns       100 ns       500 ns       1  mid\n"
              "            -            -           0            -            -            -       1  main\n");
    // clang-format on
    free(text);
}

/* ---------------------------------------------------------------- folded, call graph */

Test(views, folded_exact)
{
    char *text = example(FRP_FOLDED, NULL);
    fx_expect(text, "main 10486\n"
                    "main;leaf 318\n"
                    "main;mid 1282\n"
                    "main;mid;leaf 120\n"
                    "worker 3800\n"
                    "xpread 164724\n");
    free(text);
}

Test(views, folded_per_thread)
{
    struct frp_opts o = {.per_thread = 1};
    char *text = example(FRP_FOLDED, &o);
    /* the thread frames: from the first call to the last event of the thread */
    fx_expect(text, "prog-4242 6794\n"
                    "prog-4242;main 10486\n"
                    "prog-4242;main;leaf 318\n"
                    "prog-4242;main;mid 1282\n"
                    "prog-4242;main;mid;leaf 120\n"
                    "prog-4242;xpread 164724\n"
                    "worker 1-4243;worker 3800\n");
    free(text);
}

Test(views, folded_semicolons_in_names)
{
    static const char *const names[] = {"a;b", "c"};
    static const struct tev evs[] = {E(1, 0), E(2, 10), X(2, 30), X(1, 100)};
    struct tb b;
    tb_init(&b);
    tb_process(&b, 7, 1, 0, "./semi");
    tb_sites(&b, 7, 1, 1, names, 2, 0x1000);
    tb_events(&b, 7, 7, evs, 4);
    tb_done(&b);
    const char *path = fx_write(b.f.data, b.f.len);
    ftr_buf_free(&b.f);
    char *text = fx_render(path, FRP_FOLDED, NULL, NULL, NULL);
    fx_expect(text, "a:b 80\na:b;c 20\n");
    free(text);
}

Test(views, callgraph_exact)
{
    struct frp_opts o = {.callgraph = "leaf"};
    char *text = example(FRP_CALLGRAPH, &o);
    fx_expect(text, "# call graph of leaf: 2 calls, 438 ns\n"
                    "#\n"
                    "# called from:\n"
                    "#       Calls   Total time  Path\n"
                    "           1       318 ns  main > leaf\n"
                    "           1       120 ns  main > mid > leaf\n"
                    "#\n"
                    "#  Total time       Calls  Function\n"
                    "       438 ns           2  leaf\n");
    free(text);
    o.callgraph = "main";
    text = example(FRP_CALLGRAPH, &o);
    fx_expect(text, "# call graph of main: 1 call, 12.206 us\n"
                    "#\n"
                    "# called from:\n"
                    "#       Calls   Total time  Path\n"
                    "           1    12.206 us  main\n"
                    "#\n"
                    "#  Total time       Calls  Function\n"
                    "    12.206 us           1  main\n"
                    "       318 ns           1  +- leaf\n"
                    "     1.402 us           1  `- mid\n"
                    "       120 ns           1     `- leaf\n");
    free(text);
}

Test(views, callgraph_glob_and_missing)
{
    struct frp_opts o = {.callgraph = "m*"};
    char *text = example(FRP_CALLGRAPH, &o);
    cr_assert_not_null(strstr(text, "# call graph of main: "));
    cr_assert_not_null(strstr(text, "\n\n# call graph of mid: 1 call, 1.402 us\n"));
    free(text);
    o.callgraph = "nosuch";
    struct tb b;
    fx_example(&b);
    const char *path = fx_write(b.f.data, b.f.len);
    ftr_buf_free(&b.f);
    int rc;
    text = fx_render(path, FRP_CALLGRAPH, &o, &rc, NULL);
    cr_assert_eq(rc, FTR_E_EMPTY);
    cr_assert_str_eq(text, "");
    free(text);
}

/* The merged graph under a function called from several places, recursion inside it. */
Test(views, callgraph_merges_paths)
{
    static const struct tev evs[] = {E(MAIN, 0),   E(MID, 10),    E(LEAF, 20),    X(LEAF, 30),
                                     E(MID, 40),   E(LEAF, 50),   X(LEAF, 55),    X(MID, 60),
                                     X(MID, 70),   E(WORKER, 80), E(MID, 90),     E(LEAF, 100),
                                     X(LEAF, 110), X(MID, 120),   X(WORKER, 130), X(MAIN, 200)};
    struct tb b;
    tb_init(&b);
    tb_process(&b, 7, 1, 0, "./cg");
    tb_sites(&b, 7, 1, 1, fx_names, 5, 0x1000);
    tb_events(&b, 7, 7, evs, sizeof evs / sizeof *evs);
    tb_done(&b);
    const char *path = fx_write(b.f.data, b.f.len);
    ftr_buf_free(&b.f);
    struct frp_opts o = {.callgraph = "mid"};
    char *text = fx_render(path, FRP_CALLGRAPH, &o, NULL, NULL);
    fx_expect(text, "# call graph of mid: 2 calls, 90 ns\n"
                    "#\n"
                    "# called from:\n"
                    "#       Calls   Total time  Path\n"
                    "           1        60 ns  main > mid\n"
                    "           1        30 ns  main > worker > mid\n"
                    "#\n"
                    "#  Total time       Calls  Function\n"
                    "        90 ns           2  mid\n"
                    "        20 ns           2  +- leaf\n"
                    "        20 ns           1  `- mid\n"
                    "         5 ns           1     `- leaf\n");
    free(text);
}

/* ---------------------------------------------------------------- info */

Test(views, info)
{
    char *text = example(FRP_INFO, NULL);
    const char *want[] = {
        "  size        ",
        ", format 2.4, 8 chunks\n",
        "  chunks      1 process, 1 module, 1 sites, 3 events, 1 thread, 1 end\n",
        "  processes   1, 2 threads\n",
        "\nprocess 4242: ./prog\n",
        "  executable  /bin/prog\n",
        "  parent      1\n",
        "  duration    199.000 us\n",
        "  clock       TSC at 1.000000 GHz (measured against CLOCK_MONOTONIC_RAW)\n",
        "  ended       exited with status 0\n",
        "  events      12 recorded (6 calls), 0 lost",
        "  sites       5 found, 5 patched (0 called through), 0 skipped\n",
        "  threads     2\n",
        "    4243     worker 1         1 chunk of events\n",
        "    4242     (main)           2 chunks of events\n",
        "  modules     1\n    /bin/prog\n      base 0x400000, 5 sites, build-id none\n",
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        cr_assert_not_null(strstr(text, want[i]), "missing %s in:\n%s", want[i], text);
    cr_assert_null(strstr(text, "damage"));
    free(text);
}

/* ---------------------------------------------------------------- graph options */

#define GRAPH_HEAD                                                                                 \
    "# ftrace-run: ./prog  pid 4242  2 threads  6 calls\n"                                         \
    "#  TID      DURATION          FUNCTION CALLS\n"                                               \
    "#  |        |   |             |   |   |   |\n"

Test(views, graph_default_unchanged)
{
    char *text = example(FRP_GRAPH, NULL);
    fx_expect(text, GRAPH_HEAD "  4242)               |  main() {\n"
                               "  4242)     0.318 us  |    leaf();\n"
                               "  4243)               |  worker() {\n"
                               "  4243)               |    /* lost 123 events */\n"
                               "  4242)               |    mid() {\n"
                               "  4242)     0.120 us  |      leaf();\n"
                               "  4242)     1.402 us  |    } /* mid */\n"
                               "  4243)     3.800 us  |  } /* worker */\n"
                               "  4242) +  12.206 us  |  } /* main */\n"
                               "  4242) ! 164.724 us  |  xpread();\n");
    free(text);
}

Test(views, graph_threshold)
{
    struct frp_opts o = {.threshold_ns = 1000};
    char *text = example(FRP_GRAPH, &o);
    fx_expect(text, GRAPH_HEAD "  4242)               |  main() {\n"
                               "  4243)               |  worker() {\n"
                               "  4243)               |    /* lost 123 events */\n"
                               "  4242)     1.402 us  |    mid();\n" /* at its entry's time */
                               "  4243)     3.800 us  |  } /* worker */\n"
                               "  4242) +  12.206 us  |  } /* main */\n"
                               "  4242) ! 164.724 us  |  xpread();\n");
    free(text);
    o.threshold_ns = 1402; /* at least the threshold: shown */
    text = example(FRP_GRAPH, &o);
    cr_assert_not_null(strstr(text, "    mid();\n"), "%s", text);
    free(text);
    o.threshold_ns = 1403;
    text = example(FRP_GRAPH, &o);
    cr_assert_null(strstr(text, "mid"), "%s", text);
    cr_assert_not_null(strstr(text, "  4242) +  12.206 us  |  main();\n"), "%s", text);
    free(text);
}

/* Calls still open at the end of their thread are long enough; a deep pending tree waits. */
Test(views, graph_threshold_open_and_nested)
{
    static const struct tev evs[] = {E(MAIN, 0),    E(MID, 10),    E(LEAF, 20),  X(LEAF, 25),
                                     E(LEAF, 30),   X(LEAF, 2000), X(MID, 2010), E(MID, 3000),
                                     E(LEAF, 3001), X(LEAF, 3002)};
    struct tb b;
    tb_init(&b);
    tb_process(&b, 7, 1, 0, "./thr");
    tb_sites(&b, 7, 1, 1, fx_names, 5, 0x1000);
    tb_events(&b, 7, 7, evs, sizeof evs / sizeof *evs);
    tb_done(&b);
    const char *path = fx_write(b.f.data, b.f.len);
    ftr_buf_free(&b.f);
    struct frp_opts o = {.threshold_ns = 1000};
    char *text = fx_render(path, FRP_GRAPH, &o, NULL, NULL);
    fx_expect(text, "# ftrace-run: ./thr  pid 7  1 thread  ? calls (no end record)\n"
                    "#  TID      DURATION          FUNCTION CALLS\n"
                    "#  |        |   |             |   |   |   |\n"
                    "     7)               |  main() {\n"
                    "     7)               |    mid() {\n"
                    "     7)     1.970 us  |      leaf();\n"
                    "     7)     2.000 us  |    } /* mid */\n"
                    "     7)               |    mid() {\n");
    free(text);
}

Test(views, graph_max_depth)
{
    struct frp_opts o = {.max_depth = 1};
    char *text = example(FRP_GRAPH, &o);
    fx_expect(text, GRAPH_HEAD "  4242) +  12.206 us  |  main();\n"
                               "  4243)               |  worker() {\n"
                               "  4243)               |    /* lost 123 events */\n"
                               "  4243)     3.800 us  |  } /* worker */\n"
                               "  4242) ! 164.724 us  |  xpread();\n");
    free(text);
    o.max_depth = 2;
    text = example(FRP_GRAPH, &o);
    cr_assert_not_null(strstr(text, "  4242)     1.402 us  |    mid();\n"), "%s", text);
    cr_assert_not_null(strstr(text, "  4242)     0.318 us  |    leaf();\n"), "%s", text);
    free(text);
}

Test(views, graph_time_range)
{
    /* [400 ns, 1 us] after the start (tsc 1000): the exit of the first leaf, the whole
     * inner leaf and the entry of mid, whose exit is shown to keep the tree whole */
    struct frp_opts o = {.has_range = 1, .range_lo_ns = 400, .range_hi_ns = 1000};
    char *text = example(FRP_GRAPH, &o);
    fx_expect(text, GRAPH_HEAD "  4242)               |  mid() {\n"
                               "  4242)     0.120 us  |    leaf();\n"
                               "  4242)     1.402 us  |  } /* mid */\n");
    free(text);
    o.range_lo_ns = 19000; /* to the end */
    o.range_hi_ns = UINT64_MAX;
    text = example(FRP_GRAPH, &o);
    fx_expect(text, GRAPH_HEAD "  4242) ! 164.724 us  |  xpread();\n");
    free(text);
}

Test(views, graph_no_leaf_compact)
{
    struct frp_opts o = {.no_leaf_compact = 1};
    char *text = example(FRP_GRAPH, &o);
    fx_expect(text, GRAPH_HEAD "  4242)               |  main() {\n"
                               "  4242)               |    leaf() {\n"
                               "  4243)               |  worker() {\n"
                               "  4243)               |    /* lost 123 events */\n"
                               "  4242)     0.318 us  |    } /* leaf */\n"
                               "  4242)               |    mid() {\n"
                               "  4242)               |      leaf() {\n"
                               "  4242)     0.120 us  |      } /* leaf */\n"
                               "  4242)     1.402 us  |    } /* mid */\n"
                               "  4243)     3.800 us  |  } /* worker */\n"
                               "  4242) +  12.206 us  |  } /* main */\n"
                               "  4242)               |  xpread() {\n"
                               "  4242) ! 164.724 us  |  } /* xpread */\n");
    free(text);
}

Test(views, graph_abstime)
{
    setenv("TZ", "UTC", 1);
    tzset();
    struct frp_opts o = {.abstime = 1, .max_depth = 1};
    uint32_t tid = 4242;
    struct tb b;
    fx_example(&b);
    const char *path = fx_write(b.f.data, b.f.len);
    ftr_buf_free(&b.f);
    struct frp_report *r;
    cr_assert_eq(frp_report_open(path, &r), FTR_OK);
    frp_report_select(r, -1, &tid, 1);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cr_assert_eq(frp_render(r, FRP_GRAPH, &o, f, NULL), FTR_OK);
    fclose(f);
    frp_report_close(r);
    /* start: 1700000000.123456789 (2023-11-14 22:13:20 UTC) at tsc 1000 */
    fx_expect(text, "# ftrace-run: ./prog  pid 4242  2 threads  6 calls\n"
                    "#        TIME       |   TID      DURATION          FUNCTION CALLS\n"
                    "#         |         |   |        |   |             |   |   |   |\n"
                    "22:13:20.123456789 |  4242) +  12.206 us  |  main();\n"
                    "22:13:20.123475789 |  4242) ! 164.724 us  |  xpread();\n");
    free(text);
}

Test(views, graph_colors)
{
    struct frp_opts o = {.color = 1};
    char *text = example(FRP_GRAPH, &o);
    cr_assert_not_null(strstr(text, "  4242) \033[32m+  12.206 us\033[0m  |  } /* main */\n"), "%s",
                       text);
    cr_assert_not_null(strstr(text, "  4242) \033[33m! 164.724 us\033[0m  |  xpread();\n"));
    cr_assert_not_null(strstr(text, "  4242)     0.318 us  |    leaf();\n"));
    free(text);
}

/* ---------------------------------------------------------------- chrome, through options */

Test(views, chrome_with_depth)
{
    struct frp_opts o = {.max_depth = 1};
    char *text = example(FRP_CHROME, &o);
    cr_assert_null(strstr(text, "\"leaf\""));
    cr_assert_not_null(strstr(text, "\"name\":\"main\""));
    cr_assert_not_null(strstr(text, "\"name\":\"thread_name\",\"args\":{\"name\":\"worker 1\"}"));
    free(text);
}

/* ---------------------------------------------------------------- flame graph */

static char *flame_file(char *svg_path)
{
    struct tb b;
    fx_example(&b);
    const char *path = fx_write(b.f.data, b.f.len);
    ftr_buf_free(&b.f);
    char *text = fx_render(path, FRP_FLAME, NULL, NULL, NULL);
    int fd = mkstemps(svg_path, 4);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return text;
}

Test(views, flame_svg_well_formed)
{
    char svg[] = "/tmp/ftr_flame_XXXXXX.svg";
    char *text = flame_file(svg);
    cr_assert(strncmp(text, "<?xml version=\"1.0\"", 19) == 0);
    cr_assert_not_null(strstr(text, "<title>all\n180.730 us, 100.00%</title>"), "%s", text);
    cr_assert_not_null(strstr(text, "<title>xpread\n164.724 us, 91.14%, 1 call, self 164.724 us"
                                    "</title>"));
    cr_assert_not_null(strstr(text, "<title>leaf\n120 ns, 0.07%, 1 call, self 120 ns</title>"));
    cr_assert_not_null(strstr(text, ">Flame graph: ./prog</text>"));
    /* a strict XML parser accepts it (python's expat) */
    char cmd[256];
    snprintf(cmd, sizeof cmd,
             "python3 -c 'import sys, xml.dom.minidom as m; d = m.parse(sys.argv[1]); "
             "sys.exit(0 if d.documentElement.tagName == \"svg\" and "
             "len(d.getElementsByTagName(\"g\")) == 8 else 1)' %s",
             svg);
    int rc = system(cmd);
    unlink(svg);
    cr_assert_eq(rc, 0, "the SVG does not parse, or has not 1 + 7 groups:\n%s", text);
    free(text);
}

/* Renders the SVG in headless Chromium with "#selftest": its script zooms, searches and
 * reports in the root's data-selftest attribute. Skipped where Chromium is not installed. */
Test(views, flame_svg_renders_in_chromium, .timeout = 120)
{
    const char *bin = NULL;
    static const char *const cands[] = {"/usr/bin/chromium", "/usr/bin/chromium-browser",
                                        "/usr/bin/google-chrome"};
    for (size_t i = 0; i < 3 && !bin; i++)
        if (access(cands[i], X_OK) == 0) bin = cands[i];
    if (!bin) cr_skip_test("chromium not installed: the SVG was checked as XML only");
    char svg[] = "/tmp/ftr_flame_XXXXXX.svg";
    free(flame_file(svg));
    char dir[] = "/tmp/ftr_chromium_XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "timeout 90 %s --headless --no-sandbox --disable-gpu --disable-background-networking "
             "--disable-component-update --disable-sync --no-first-run --user-data-dir=%s "
             "--dump-dom 'file://%s#selftest' 2>/dev/null",
             bin, dir, svg);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    char dom[8192];
    size_t n = fread(dom, 1, sizeof dom - 1, p);
    dom[n] = 0;
    pclose(p);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) cr_log_warn("could not remove %s", dir);
    unlink(svg);
    cr_assert_not_null(strstr(dom, "data-ready=\"7\""), "the script did not run:\n%.600s", dom);
    cr_assert_not_null(strstr(dom, "data-selftest=\"ok\""), "self-test:\n%.600s", dom);
}

/* Many functions open at once (the per-thread table grows under open calls), one of them
 * recursive: its nested call is not counted twice in its total. */
Test(views, summary_many_open_functions)
{
    enum { N = 300 };
    static char names[N][8];
    struct ftr_site_info si[N];
    for (uint32_t i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "f%u", i + 1);
        si[i] = (struct ftr_site_info){i + 1, 0x1000 + 16 * i, 0x1000 + 16 * i, names[i]};
    }
    struct ftr_rec r[2 * N + 2];
    size_t n = 0;
    uint64_t tsc = 1;
    for (uint32_t i = 1; i <= N; i++)
        r[n++] = (struct ftr_rec){tsc++, ftr_rec_head(i, FTR_EV_ENTRY), 0};
    r[n++] = (struct ftr_rec){tsc++, ftr_rec_head(1, FTR_EV_ENTRY), 0};
    r[n++] = (struct ftr_rec){tsc++, ftr_rec_head(1, FTR_EV_EXIT), 0};
    for (uint32_t i = N; i >= 1; i--)
        r[n++] = (struct ftr_rec){tsc++, ftr_rec_head(i, FTR_EV_EXIT), 0};
    struct tb b;
    tb_init(&b);
    tb_process(&b, 5, 1, 0, "./many");
    cr_assert_eq(ftr_enc_sites(b.e, 5, 1, si, N, &b.f), FTR_OK);
    cr_assert_eq(ftr_enc_events(b.e, 5, 5, r, n, &b.f), FTR_OK);
    tb_done(&b);
    const char *path = fx_write(b.f.data, b.f.len);
    ftr_buf_free(&b.f);
    struct frp_opts o = {.sort = FRP_SORT_CALLS};
    char *text = fx_render(path, FRP_SUMMARY, &o, NULL, NULL);
    cr_assert(strncmp(text, "# 300 functions, 301 calls\n", 27) == 0, "%s", text);
    /* f1: 1 -> 602 (f2 took 2 -> 601) and 301 -> 302 */
    cr_assert_not_null(strstr(text, "\n       601 ns         3 ns           2       301 ns         "
                                    "1 ns       601 ns  f1\n"),
                       "%.600s", text);
    free(text);
}

/* ---------------------------------------------------------------- ftrace-ctl marks */

/* fx_example with what ftrace-ctl changed: before any event, while main is in mid (shown on
 * the main thread, at its depth), after main's last event (its stream is done), in any order
 * in the file. */
static const char *marks_example(void)
{
    static const struct ftr_mark_info mk[] = {
        {.tsc = 1550, .what = FTR_MARK_FILTER, .text = "mid,leaf"},
        {.tsc = 900, .what = FTR_MARK_ON},
        {.tsc = 1650, .what = FTR_MARK_DEPTH, .value = 3},
        {.tsc = 1660, .what = FTR_MARK_THRESHOLD, .value = 1500},
        {.tsc = 190000, .what = FTR_MARK_OFF},
        {.tsc = 190001, .what = FTR_MARK_FILTER, .text = ""}};
    struct tb b;
    fx_example(&b);
    b.e = ftr_enc_new(1);
    for (size_t i = 0; i < sizeof mk / sizeof *mk; i++)
        cr_assert_eq(ftr_enc_mark(b.e, 4242, &mk[i], &b.f), FTR_OK);
    tb_done(&b);
    const char *path = fx_write(b.f.data, b.f.len);
    ftr_buf_free(&b.f);
    return path;
}

Test(views, marks_in_graph)
{
    char *text = fx_render(marks_example(), FRP_GRAPH, NULL, NULL, NULL);
    const char *want[] = {"/* tracing on */",        "main() {",
                          "/* filter 'mid,leaf' */", "leaf();",
                          "/* max-depth 3 */",       "/* threshold 1.500 us */",
                          "/* tracing off */",       "/* filter: every function */"};
    const char *at = text;
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        const char *p = strstr(at, want[i]);
        cr_assert_not_null(p, "%s missing or out of order in:\n%s", want[i], text);
        at = p;
    }
    /* on main's lines, at its depth (inside mid) */
    cr_assert_not_null(strstr(text, " 4242)               |      /* max-depth 3 */\n"), "%s", text);
    cr_assert_not_null(strstr(text, " 4242)               |  /* tracing on */\n"), "%s", text);
    free(text);
}

Test(views, marks_in_chrome_and_info)
{
    const char *path = marks_example();
    char *text = fx_render(path, FRP_CHROME, NULL, NULL, NULL);
    cr_assert_not_null(strstr(text, "{\"ph\":\"i\",\"pid\":4242,\"tid\":4242,\"ts\":0.550,"
                                    "\"s\":\"p\",\"name\":\"filter 'mid,leaf'\"}"),
                       "%s", text);
    cr_assert_not_null(strstr(text, "\"s\":\"p\",\"name\":\"tracing off\"}"), "%s", text);
    free(text);
    text = fx_render(path, FRP_INFO, NULL, NULL, NULL);
    cr_assert_not_null(strstr(text, "  marks       6 (ftrace-ctl), after start:\n"
                                    "           0 ns  tracing on\n"
                                    "         550 ns  filter 'mid,leaf'\n"
                                    "         650 ns  max-depth 3\n"
                                    "         660 ns  threshold 1.500 us\n"
                                    "     189.000 us  tracing off\n"
                                    "     189.001 us  filter: every function\n"
                                    "  modules"),
                       "%s", text);
    free(text);
}
