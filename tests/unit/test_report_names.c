/*
 * test_report_names.c - names in ftrace-report: demangling, module suffixes, symbols and
 * source lines from the module files (checked against the recorded build-id), and --filter.
 */
#define _GNU_SOURCE /* dl_iterate_phdr */
#include "test_report_fixture.h"

#include <elf.h>
#include <limits.h>
#include <link.h>

#ifdef FRP_HAVE_FILTER
#include "ftr_filter.h"
#endif

TestSuite(names, .fini = fx_cleanup);

/* ---------------------------------------------------------------- demangling */

static void demangled(const char *sym, enum frp_demangle mode, const char *want)
{
    char *got = frp_demangle(sym, mode);
    if (!want) {
        cr_assert_null(got, "%s -> %s, want nothing", sym, got);
        return;
    }
    cr_assert_not_null(got, "%s: not demangled", sym);
    cr_assert_str_eq(got, want, "%s", sym);
    free(got);
}

Test(names, demangle_simple_and_full)
{
    demangled("_ZN5store7use_boxEi", FRP_DEMANGLE_SIMPLE, "store::use_box");
    demangled("_ZN5store7use_boxEi", FRP_DEMANGLE_FULL, "store::use_box(int)");
    demangled("_ZN5store7use_boxEi", FRP_DEMANGLE_NONE, NULL);
    demangled("_ZNK5store3BoxIiE3getEv.isra.0", FRP_DEMANGLE_SIMPLE, "store::Box<int>::get.isra.0");
    demangled("_ZNK5store3BoxIiE3getEv.isra.0", FRP_DEMANGLE_FULL,
              "store::Box<int>::get() const [clone .isra.0]");
    demangled("_ZNK2OpclEi", FRP_DEMANGLE_SIMPLE, "Op::operator()");
    demangled("_Z3maxIiET_S0_S0_", FRP_DEMANGLE_SIMPLE, "max<int>");
    demangled("_Z3maxIiET_S0_S0_", FRP_DEMANGLE_FULL, "int max<int>(int, int)");
    demangled("_ZN12_GLOBAL__N_16helperEi", FRP_DEMANGLE_SIMPLE, "(anonymous namespace)::helper");
    demangled("_Znwm", FRP_DEMANGLE_SIMPLE, "operator new");
    demangled("_ZN3FoocviEv", FRP_DEMANGLE_SIMPLE, "Foo::operator int");
    demangled("_ZZ4mainENKUliE_clEi", FRP_DEMANGLE_SIMPLE, "main::{lambda(int)#1}::operator()");
    demangled("_ZltI1AEbRKT_S3_", FRP_DEMANGLE_SIMPLE, "operator< <A>");
    demangled("_ZNSt6vectorIiSaIiEE9push_backERKi", FRP_DEMANGLE_SIMPLE,
              "std::vector<int, std::allocator<int> >::push_back");
    demangled("main", FRP_DEMANGLE_SIMPLE, NULL);
    demangled("_Zgarbage(", FRP_DEMANGLE_SIMPLE, NULL);
    demangled("", FRP_DEMANGLE_SIMPLE, NULL);
}

/* ---------------------------------------------------------------- display names */

static const char *const cxx_names[] = {"main", "_ZN5store7use_boxEi", "_ZNK2OpclEi", "plain_c"};

static const char *cxx_trace(void)
{
    static const struct tev evs[] = {E(1, 0),  E(3, 10), E(2, 20), X(2, 30),
                                     X(3, 40), E(4, 50), X(4, 60), X(1, 100)};
    struct tb b;
    tb_init(&b);
    tb_process(&b, 9, 1, 0, "./cxx");
    tb_module(&b, 9, 1, "/bin/prog", 0x400000, NULL, 0);
    tb_module(&b, 9, 2, "/usr/lib/libstore.so.1", 0x7f0000000000, NULL, 0);
    tb_sites(&b, 9, 1, 1, cxx_names, 1, 0x401000);
    tb_sites(&b, 9, 2, 2, cxx_names + 1, 2, 0x7f0000001000);
    tb_sites(&b, 9, 1, 4, cxx_names + 3, 1, 0x402000);
    tb_events(&b, 9, 9, evs, sizeof evs / sizeof *evs);
    tb_done(&b);
    const char *path = fx_write(b.f.data, b.f.len);
    ftr_buf_free(&b.f);
    return path;
}

static char *graph_with_names(const char *path, enum frp_demangle mode, int show_module)
{
    struct frp_report *r;
    cr_assert_eq(frp_report_open(path, &r), FTR_OK);
    cr_assert_eq(frp_report_names(r, mode, show_module), FTR_OK);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cr_assert_eq(frp_render(r, FRP_GRAPH, NULL, f, NULL), FTR_OK);
    fclose(f);
    frp_report_close(r);
    char *body = strdup(strstr(text, "|   |   |   |\n") + 14);
    free(text);
    return body;
}

Test(names, display_names)
{
    const char *path = cxx_trace();
    char *text = graph_with_names(path, FRP_DEMANGLE_SIMPLE, 0);
    fx_expect(text, "     9)               |  main() {\n"
                    "     9)               |    Op::operator()() {\n"
                    "     9)     0.010 us  |      store::use_box();\n"
                    "     9)     0.030 us  |    } /* Op::operator() */\n"
                    "     9)     0.010 us  |    plain_c();\n"
                    "     9)     0.100 us  |  } /* main */\n");
    free(text);
    text = graph_with_names(path, FRP_DEMANGLE_NONE, 1);
    fx_expect(text, "     9)               |  main@prog() {\n"
                    "     9)               |    _ZNK2OpclEi@libstore.so.1() {\n"
                    "     9)     0.010 us  |      _ZN5store7use_boxEi@libstore.so.1();\n"
                    "     9)     0.030 us  |    } /* _ZNK2OpclEi@libstore.so.1 */\n"
                    "     9)     0.010 us  |    plain_c@prog();\n"
                    "     9)     0.100 us  |  } /* main@prog */\n");
    free(text);
    text = graph_with_names(path, FRP_DEMANGLE_FULL, 1);
    cr_assert_not_null(strstr(text, "|      store::use_box(int)@libstore.so.1();\n"), "%s", text);
    free(text);
}

/* ---------------------------------------------------------------- the test's own binary */

static const int probe_line = __LINE__ + 1;
__attribute__((noinline)) int probe_fn(int x)
{
    __asm__ volatile("" : "+r"(x));
    return x * 3 + 1;
}

struct self {
    char path[PATH_MAX];
    uint64_t base;
    uint8_t build_id[64];
    uint32_t build_id_len;
};

static int find_main(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct self *s = arg;
    s->base = info->dlpi_addr;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE) continue;
        const uint8_t *p = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
            const uint8_t *name = p + sizeof *nh, *desc = name + ((nh->n_namesz + 3) & ~3u);
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && !memcmp(name, "GNU", 4) &&
                nh->n_descsz <= sizeof s->build_id) {
                memcpy(s->build_id, desc, nh->n_descsz);
                s->build_id_len = nh->n_descsz;
            }
            p = desc + ((nh->n_descsz + 3) & ~3u);
        }
    }
    return 1; /* the first object is the program */
}

static void self_info(struct self *s)
{
    memset(s, 0, sizeof *s);
    ssize_t n = readlink("/proc/self/exe", s->path, sizeof s->path - 1);
    cr_assert(n > 0);
    s->path[n] = 0;
    dl_iterate_phdr(find_main, s);
    if (!s->build_id_len) cr_skip_test("the test binary has no build-id");
}

/* A trace of one call of probe_fn, the site named name, the module file path with build-id
 * id (NULL: the real one). */
static const char *self_trace(const struct self *s, const char *path, const uint8_t *id,
                              const char *name)
{
    static const struct tev evs[] = {E(1, 0), X(1, 50)};
    struct ftr_site_info si = {1, (uint64_t)(uintptr_t)probe_fn, (uint64_t)(uintptr_t)probe_fn,
                               name};
    struct tb b;
    tb_init(&b);
    tb_process(&b, 11, 1, 0, "./self");
    tb_module(&b, 11, 1, path, s->base, id ? id : s->build_id, s->build_id_len);
    cr_assert_eq(ftr_enc_sites(b.e, 11, 1, &si, 1, &b.f), FTR_OK);
    tb_events(&b, 11, 11, evs, 2);
    tb_done(&b);
    const char *file = fx_write(b.f.data, b.f.len);
    ftr_buf_free(&b.f);
    return file;
}

Test(names, srcline_from_dwarf)
{
    struct self s;
    self_info(&s);
    struct frp_report *r;
    cr_assert_eq(frp_report_open(self_trace(&s, s.path, NULL, "probe_fn"), &r), FTR_OK);
    const char *src = frp_srcline(r, r->procs[0], 1);
    cr_assert_not_null(src, "no source line for %s", s.path);
    char want[64];
    snprintf(want, sizeof want, "/test_report_names.c:%d", probe_line);
    size_t n = strlen(src), w = strlen(want);
    cr_assert(n >= w && strcmp(src + n - w, want) == 0, "%s, want ...%s", src, want);
    cr_assert_eq(frp_srcline(r, r->procs[0], 1), src); /* cached */
    cr_assert_null(frp_srcline(r, r->procs[0], 99));

    /* the graph's comment and the summary's column */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    struct frp_opts o = {.srcline = 1};
    cr_assert_eq(frp_render(r, FRP_GRAPH, &o, f, NULL), FTR_OK);
    fclose(f);
    char line[PATH_MAX + 64];
    snprintf(line, sizeof line, "    11)     0.050 us  |  probe_fn(); /* %s */\n", src);
    cr_assert_not_null(strstr(text, line), "%s", text);
    free(text);
    f = open_memstream(&text, &len);
    cr_assert_eq(frp_render(r, FRP_SUMMARY, &o, f, NULL), FTR_OK);
    fclose(f);
    snprintf(line, sizeof line, "  probe_fn [%s]\n", src);
    cr_assert_not_null(strstr(text, line), "%s", text);
    free(text);
    frp_report_close(r);
}

Test(names, srcline_refuses_another_build)
{
    struct self s;
    self_info(&s);
    uint8_t other[64];
    memcpy(other, s.build_id, s.build_id_len);
    other[0] ^= 0xff;
    struct frp_report *r;
    cr_assert_eq(frp_report_open(self_trace(&s, s.path, other, "probe_fn"), &r), FTR_OK);
    cr_assert_null(frp_srcline(r, r->procs[0], 1));
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    frp_names_warnings(r, f);
    fclose(f);
    cr_assert_not_null(strstr(text, "ftrace-report: no source lines for "));
    cr_assert_not_null(strstr(text, ": the file is another build (build-id differs from the "
                                    "trace's)\n"),
                       "%s", text);
    free(text);
    frp_report_close(r);

    cr_assert_eq(frp_report_open(self_trace(&s, "/nonexistent/prog", NULL, "probe_fn"), &r),
                 FTR_OK);
    cr_assert_null(frp_srcline(r, r->procs[0], 1));
    f = open_memstream(&text, &len);
    frp_names_warnings(r, f);
    fclose(f);
    cr_assert_str_eq(text,
                     "ftrace-report: no source lines for /nonexistent/prog: file not found\n");
    free(text);
    frp_report_close(r);
}

/* A site recorded without a symbol ("0x..."): named from the module file when it matches. */
Test(names, symbol_from_module_file)
{
    struct self s;
    self_info(&s);
    struct frp_report *r;
    cr_assert_eq(frp_report_open(self_trace(&s, s.path, NULL, "0x1234"), &r), FTR_OK);
    cr_assert_str_eq(frp_site_name(r, r->procs[0], 1).s, "0x1234");
    cr_assert_eq(frp_report_names(r, FRP_DEMANGLE_SIMPLE, 0), FTR_OK);
    cr_assert_str_eq(frp_site_name(r, r->procs[0], 1).s, "probe_fn");
    frp_report_close(r);
    uint8_t other[64] = {1};
    cr_assert_eq(frp_report_open(self_trace(&s, s.path, other, "0x1234"), &r), FTR_OK);
    cr_assert_eq(frp_report_names(r, FRP_DEMANGLE_SIMPLE, 0), FTR_OK);
    cr_assert_str_eq(frp_site_name(r, r->procs[0], 1).s, "0x1234");
    frp_report_close(r);
    cr_assert_eq(probe_fn(1), 4);
}

/* ---------------------------------------------------------------- --filter */

#ifdef FRP_HAVE_FILTER
static char *filtered(const char *path, const char *expr)
{
    char err[256];
    struct ftr_filter *flt = ftr_filter_parse(expr, err, sizeof err);
    cr_assert_not_null(flt, "%s: %s", expr, err);
    struct frp_opts o = {.filter = flt};
    struct frp_report *r;
    cr_assert_eq(frp_report_open(path, &r), FTR_OK);
    cr_assert_eq(frp_report_names(r, FRP_DEMANGLE_SIMPLE, 0), FTR_OK);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cr_assert_eq(frp_render(r, FRP_GRAPH, &o, f, NULL), FTR_OK);
    fclose(f);
    frp_report_close(r);
    ftr_filter_free(flt);
    char *body = strdup(strstr(text, "|   |   |   |\n") + 14);
    free(text);
    return body;
}

Test(names, filter_hides_and_reattaches)
{
    struct tb b;
    fx_example(&b);
    const char *path = fx_write(b.f.data, b.f.len);
    ftr_buf_free(&b.f);
    char *text = filtered(path, "-mid");
    fx_expect(text, "  4242)               |  main() {\n"
                    "  4242)     0.318 us  |    leaf();\n"
                    "  4243)               |  worker() {\n"
                    "  4243)               |    /* lost 123 events */\n"
                    "  4242)     0.120 us  |    leaf();\n"
                    "  4243)     3.800 us  |  } /* worker */\n"
                    "  4242) +  12.206 us  |  } /* main */\n"
                    "  4242) ! 164.724 us  |  xpread();\n");
    free(text);
    text = filtered(path, "m*,-main"); /* special events stay */
    fx_expect(text, "  4243)               |  /* lost 123 events */\n"
                    "  4242)     1.402 us  |  mid();\n");
    free(text);
    text = filtered(path, "exe:main,prog:leaf"); /* the module: its file name, or exe */
    fx_expect(text, "  4242)               |  main() {\n"
                    "  4242)     0.318 us  |    leaf();\n"
                    "  4243)               |  /* lost 123 events */\n"
                    "  4242)     0.120 us  |    leaf();\n"
                    "  4242) +  12.206 us  |  } /* main */\n");
    free(text);
}

Test(names, filter_matches_raw_or_demangled)
{
    const char *path = cxx_trace();
    char *text = filtered(path, "store::*");
    fx_expect(text, "     9)     0.010 us  |  store::use_box();\n");
    free(text);
    text = filtered(path, "_ZNK2*");
    fx_expect(text, "     9)     0.030 us  |  Op::operator()();\n");
    free(text);
    text = filtered(path, "-Op::*"); /* excluded by either name */
    cr_assert_null(strstr(text, "Op::"), "%s", text);
    cr_assert_not_null(strstr(text, "|    store::use_box();\n"), "%s", text);
    free(text);

    char err[256];
    struct ftr_filter *flt = ftr_filter_parse("nosuch*", err, sizeof err);
    struct frp_report *r;
    cr_assert_eq(frp_report_open(path, &r), FTR_OK);
    cr_assert_eq(frp_filter_count(r, flt), 0);
    ftr_filter_free(flt);
    flt = ftr_filter_parse("libstore.so*:*", err, sizeof err);
    cr_assert_eq(frp_filter_count(r, flt), 2);
    ftr_filter_free(flt);
    frp_report_close(r);
}

/* the filter's C++ forms: the parameter list picks one overload, globs cross "::" */
Test(names, filter_cxx_parameters_and_globs)
{
    const char *path = cxx_trace();
    char *text = filtered(path, "store::use_box(int)");
    fx_expect(text, "     9)     0.010 us  |  store::use_box();\n");
    free(text);
    text = filtered(path, "store::use_box(int),main");
    cr_assert_not_null(strstr(text, "|    store::use_box();\n"), "%s", text);
    free(text);
    text = filtered(path, "Op::operator()(int) const");
    fx_expect(text, "     9)     0.030 us  |  Op::operator()();\n");
    free(text);
    text = filtered(path, "*::*,-store::use_box(int)"); /* only Op::operator() is left */
    fx_expect(text, "     9)     0.030 us  |  Op::operator()();\n");
    free(text);
    text = filtered(path, "@^store::use_box\\(int\\)$");
    fx_expect(text, "     9)     0.010 us  |  store::use_box();\n");
    free(text);

    char err[256];
    struct frp_report *r;
    cr_assert_eq(frp_report_open(path, &r), FTR_OK);
    struct ftr_filter *flt = ftr_filter_parse("store::use_box(long)", err, sizeof err);
    cr_assert_eq(frp_filter_count(r, flt), 0);
    ftr_filter_free(flt);
    flt = ftr_filter_parse("*", err, sizeof err);
    cr_assert_eq(frp_filter_count(r, flt), 4);
    ftr_filter_free(flt);
    frp_report_close(r);
}
#endif
