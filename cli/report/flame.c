/*
 * flame.c - a self-contained interactive SVG flame graph (--flamegraph OUT.svg).
 *
 * One box per call path of the merged call tree: its width is the path's inclusive time,
 * callers below callees, siblings in alphabetical order (so that two graphs of the same
 * program line up). Boxes narrower than 0.1 pixel are left out with everything above them,
 * which bounds the file whatever the trace. The embedded script (no external resource) shows
 * the name, time and share of the box under the mouse, zooms into a box on click (its
 * callers stay, faded, below it), and highlights the functions matching a regular expression
 * (Search, or Ctrl-F) with the share of time they cover.
 *
 * When the document is opened with "#selftest" at the end of its URL, the script zooms into
 * the widest box, checks the layout and writes the result to the root element's
 * data-selftest attribute (the unit test reads it back from headless Chromium).
 */
#define _GNU_SOURCE /* qsort_r */
#include "flame.h"

#include "util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define WIDTH 1200
#define PAD 10
#define FRAME_H 16
#define FONT 12
#define CHAR_W 7.08 /* average glyph width of a 12 px sans-serif font */
#define TOP 40      /* title, buttons */
#define BOTTOM 30   /* details line */
#define MIN_W 0.1   /* pixels */

/* fw and pad are CHAR_W and PAD */
static const char script[] =
    "var fw=7.08,pad=10,frames=[],det,matched,resetb,zoomed=null,full;\n"
    "function nm(g){return g.querySelector('title').textContent.split('\\n')[0];}\n"
    "function fit(g,x,w){var t=g.querySelector('text'),n=g._n,c=Math.floor((w-6)/fw);\n"
    " t.setAttribute('x',x+3);\n"
    " t.textContent=c<3?'':n.length<=c?n:n.substr(0,c-2)+'..';}\n"
    "function place(g,x,w,show,faded){var r=g.querySelector('rect');\n"
    " g.style.display=show?'':'none';if(!show)return;\n"
    " r.setAttribute('x',x);r.setAttribute('width',w);\n"
    " g.setAttribute('class',faded?'f faded':'f');fit(g,x,w);}\n"
    "function zoom(z){var k=full/z._w;zoomed=z;resetb.setAttribute('visibility','visible');\n"
    " frames.forEach(function(g){\n"
    "  var inside=g._x>=z._x-1e-6&&g._x+g._w<=z._x+z._w+1e-6;\n"
    "  if(g._y<=z._y&&inside)place(g,pad+(g._x-z._x)*k,g._w*k,true,false);\n"
    "  else if(g._y>z._y&&g._x<=z._x+1e-6&&g._x+g._w>=z._x+z._w-1e-6)\n"
    "   place(g,pad,full,true,true);\n"
    "  else place(g,0,0,false,false);});}\n"
    "function unzoom(){zoomed=null;resetb.setAttribute('visibility','hidden');\n"
    " frames.forEach(function(g){place(g,g._x,g._w,true,false);});}\n"
    "function search(re){var m=[],tot=0,end=-1;\n"
    " frames.forEach(function(g){var r=g.querySelector('rect'),hit=re&&re.test(g._n);\n"
    "  r.setAttribute('fill',hit?'rgb(230,0,230)':g._fill);if(hit)m.push([g._x,g._w]);});\n"
    " m.sort(function(a,b){return a[0]-b[0];});\n"
    " m.forEach(function(a){var s=Math.max(a[0],end),e=a[0]+a[1];if(e>s){tot+=e-s;end=e;}});\n"
    " matched.textContent=re?'Matched: '+(100*tot/full).toFixed(2)+'%':'';return tot;}\n"
    "function ask(){var s=prompt('Highlight the functions matching (regular expression):','');\n"
    " if(s===null)return;try{search(s?new RegExp(s):null);}catch(e){alert(e);}}\n"
    "function selftest(){var best=null;frames.forEach(function(g){\n"
    "  if(g._y<frames[0]._y&&(!best||g._w>best._w))best=g;});\n"
    " var res='ok';if(best){zoom(best);var r=best.querySelector('rect');\n"
    "  if(Math.abs(+r.getAttribute('width')-full)>0.01)res='fail: zoomed width '+\n"
    "   r.getAttribute('width');\n"
    "  frames.forEach(function(g){if(g!==best&&g.style.display!=='none'&&g._y<best._y&&\n"
    "   +g.querySelector('rect').getAttribute('x')<pad-0.01)res='fail: callee out of view';});\n"
    "  unzoom();}\n"
    " var t=search(/./);if(Math.abs(t-full)>0.5)res='fail: search covers '+t+' of '+full;\n"
    " search(null);document.documentElement.setAttribute('data-selftest',res);}\n"
    "function init(){det=document.getElementById('details');matched=document.getElementById("
    "'matched');\n"
    " resetb=document.getElementById('reset');\n"
    " frames=Array.prototype.slice.call(document.querySelectorAll('g.f'));\n"
    " frames.forEach(function(g){var r=g.querySelector('rect');g._x=+r.getAttribute('x');\n"
    "  g._w=+r.getAttribute('width');g._y=+r.getAttribute('y');g._n=nm(g);\n"
    "  g._fill=r.getAttribute('fill');});\n"
    " full=frames.length?frames[0]._w:1;\n"
    " var fr=document.getElementById('frames');\n"
    " fr.addEventListener('click',function(e){var g=e.target.closest('g.f');if(!g)return;\n"
    "  if(g===frames[0])unzoom();else zoom(g);});\n"
    " fr.addEventListener('mouseover',function(e){var g=e.target.closest('g.f');\n"
    "  if(g)det.textContent=g.querySelector('title').textContent.replace('\\n',': ');});\n"
    " fr.addEventListener('mouseout',function(){det.textContent=' ';});\n"
    " resetb.addEventListener('click',unzoom);\n"
    " document.getElementById('search').addEventListener('click',ask);\n"
    " window.addEventListener('keydown',function(e){\n"
    "  if((e.ctrlKey||e.metaKey)&&e.key==='f'){e.preventDefault();ask();}\n"
    "  if(e.key==='Escape'){search(null);unzoom();}});\n"
    " document.documentElement.setAttribute('data-ready',String(frames.length));\n"
    " if(location.hash==='#selftest')selftest();}\n"
    "window.addEventListener('load',init);\n";

static void xml_escape(struct frp_out *o, const char *s, size_t n)
{
    size_t start = 0;
    for (size_t i = 0; i < n; i++) {
        const char *e = NULL;
        switch (s[i]) {
        case '&':
            e = "&amp;";
            break;
        case '<':
            e = "&lt;";
            break;
        case '>':
            e = "&gt;";
            break;
        case '"':
            e = "&quot;";
            break;
        case '\'':
            e = "&apos;";
            break;
        default:
            continue;
        }
        frp_out_write(o, s + start, i - start);
        frp_out_str(o, e);
        start = i + 1;
    }
    frp_out_write(o, s + start, n - start);
}

/* A warm colour from the name, the same for a function in every graph. */
static void color_of(const struct frp_name *nm, unsigned rgb[3])
{
    uint64_t h = frp_hash_str(nm->s, nm->len);
    rgb[0] = 205 + (unsigned)(h % 51);
    rgb[1] = (unsigned)((h >> 8) % 180) + 50;
    rgb[2] = (unsigned)((h >> 16) % 56);
}

static const struct frp_name *name_of(const struct frp_tree *t, uint32_t node)
{
    static const struct frp_name all = {"all", 3};
    return node ? &t->funcs.names[t->nodes[node].func] : &all;
}

static int cmp_name(const void *a, const void *b, void *arg)
{
    const struct frp_tree *t = arg;
    const struct frp_name *x = name_of(t, *(const uint32_t *)a),
                          *y = name_of(t, *(const uint32_t *)b);
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->s, y->s, n);
    if (c) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

static void frame(struct frp_out *o, const struct frp_tree *t, uint32_t node, double x, double w,
                  uint32_t depth, int height, uint64_t total)
{
    const struct frp_name *nm = name_of(t, node);
    uint64_t ns = node ? t->nodes[node].total_ns : total;
    char tm[40];
    frp_fmt_time(tm, ns);
    const char *ts = tm;
    while (*ts == ' ')
        ts++;
    unsigned rgb[3];
    color_of(nm, rgb);
    double y = height - BOTTOM - (double)(depth + 1) * FRAME_H;
    frp_out_lit(o, "<g class=\"f\"><title>");
    xml_escape(o, nm->s, nm->len);
    frp_out_printf(o, "\n%s, %.2f%%", ts, total ? 100.0 * (double)ns / (double)total : 100.0);
    if (node) {
        char self[40];
        frp_fmt_time(self, t->nodes[node].self_ns);
        const char *ss = self;
        while (*ss == ' ')
            ss++;
        frp_out_printf(o, ", %llu call%s, self %s", (unsigned long long)t->nodes[node].calls,
                       t->nodes[node].calls == 1 ? "" : "s", ss);
    }
    frp_out_printf(o,
                   "</title><rect x=\"%.2f\" y=\"%.0f\" width=\"%.2f\" height=\"%d\" "
                   "fill=\"rgb(%u,%u,%u)\" rx=\"2\"/><text x=\"%.2f\" y=\"%.1f\">",
                   x, y, w, FRAME_H - 1, rgb[0], rgb[1], rgb[2], x + 3, y + FRAME_H - 4.5);
    int c = (int)((w - 6) / CHAR_W);
    if (c >= 3) {
        /* cut at a character boundary of the UTF-8 name */
        if ((int)nm->len <= c) {
            xml_escape(o, nm->s, nm->len);
        } else {
            size_t k = (size_t)(c - 2);
            while (k > 0 && ((unsigned char)nm->s[k] & 0xc0) == 0x80)
                k--;
            xml_escape(o, nm->s, k);
            frp_out_lit(o, "..");
        }
    }
    frp_out_lit(o, "</text></g>\n");
}

struct item {
    uint32_t node, depth;
    double x;
};

int frp_flame_write(struct frp_tree *t, const struct frp_opts *opt, FILE *out)
{
    struct frp_out o;
    if (frp_out_init(&o, out, 1 << 20)) return errno = ENOMEM, -1;
    uint64_t total = t->nodes[0].total_ns;
    double full = WIDTH - 2 * PAD, scale = total ? full / (double)total : 0;
    /* depth of the drawn graph, for the height */
    uint32_t maxd = 0;
    for (uint32_t i = 1; i < t->n; i++)
        if (t->nodes[i].depth > maxd && (double)t->nodes[i].total_ns * scale >= MIN_W)
            maxd = t->nodes[i].depth;
    int height = TOP + BOTTOM + (int)(maxd + 1) * FRAME_H;

    frp_out_printf(&o,
                   "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
                   "<svg version=\"1.1\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                   "xmlns=\"http://www.w3.org/2000/svg\">\n"
                   "<style>text{font-family:Verdana,Helvetica,sans-serif;font-size:%dpx;"
                   "fill:#000}\n"
                   "#title{font-size:17px}.btn{cursor:pointer;fill:#2050a0}"
                   "g.f{cursor:pointer}g.f:hover rect{stroke:#000;stroke-width:0.6}"
                   "g.f.faded{opacity:0.5}g.f text{pointer-events:none}</style>\n"
                   "<script type=\"text/ecmascript\"><![CDATA[\n",
                   WIDTH, height, WIDTH, height, FONT);
    frp_out_write(&o, script, sizeof script - 1);
    frp_out_printf(&o,
                   "]]></script>\n"
                   "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#f8f8f4\"/>\n"
                   "<text id=\"title\" x=\"%d\" y=\"24\" text-anchor=\"middle\">",
                   WIDTH, height, WIDTH / 2);
    const char *title = opt && opt->title ? opt->title : NULL;
    if (title) {
        xml_escape(&o, title, strlen(title));
    } else {
        frp_out_lit(&o, "Flame graph");
        const struct frp_report *r = t->funcs.r;
        for (uint32_t i = 0; i < r->nprocs; i++) {
            if (!r->order[i]->selected) continue;
            frp_out_lit(&o, ": ");
            xml_escape(&o, r->order[i]->cmdline, strlen(r->order[i]->cmdline));
            break;
        }
    }
    frp_out_printf(&o,
                   "</text>\n"
                   "<text id=\"reset\" class=\"btn\" x=\"%d\" y=\"24\" "
                   "visibility=\"hidden\">Reset zoom</text>\n"
                   "<text id=\"search\" class=\"btn\" x=\"%d\" y=\"24\" "
                   "text-anchor=\"end\">Search</text>\n"
                   "<text id=\"details\" x=\"%d\" y=\"%d\"> </text>\n"
                   "<text id=\"matched\" x=\"%d\" y=\"%d\" text-anchor=\"end\"> </text>\n"
                   "<g id=\"frames\">\n",
                   PAD, WIDTH - PAD, PAD, height - 10, WIDTH - PAD, height - 10);

    /* depth first, children by name; a stack of boxes still to draw */
    struct item *st = NULL;
    uint32_t *kids = NULL;
    size_t stcap = 0, kcap = 0, n = 0;
    int rc = frp_grow((void **)&st, &stcap, 1, sizeof *st);
    if (!rc) st[n++] = (struct item){0, 0, PAD};
    while (n && !rc) {
        struct item it = st[--n];
        double w = it.node ? (double)t->nodes[it.node].total_ns * scale : full;
        frame(&o, t, it.node, it.x, w, it.depth, height, total);
        size_t nk = 0;
        int wide = 0;
        for (uint32_t c = t->nodes[it.node].child; c && !rc; c = t->nodes[c].sibling) {
            wide |= (double)t->nodes[c].total_ns * scale >= MIN_W;
            rc = frp_grow((void **)&kids, &kcap, nk + 1, sizeof *kids);
            if (!rc) kids[nk++] = c;
        }
        if (rc || !wide) continue;
        qsort_r(kids, nk, sizeof *kids, cmp_name, t);
        /* each child after the siblings before it by name, drawn or too narrow; pushed in
         * reverse so that they come out in order */
        double x = it.x;
        rc = frp_grow((void **)&st, &stcap, n + nk, sizeof *st);
        size_t first = n;
        for (size_t k = 0; k < nk && !rc; k++) {
            double w = (double)t->nodes[kids[k]].total_ns * scale;
            if (w >= MIN_W) st[n++] = (struct item){kids[k], it.depth + 1, x};
            x += w;
        }
        for (size_t a = first, b = n; a + 1 < b; a++, b--) {
            struct item tmp = st[a];
            st[a] = st[b - 1];
            st[b - 1] = tmp;
        }
    }
    free(st);
    free(kids);
    frp_out_lit(&o, "</g>\n</svg>\n");
    if (rc) {
        frp_out_free(&o);
        return errno = ENOMEM, -1;
    }
    rc = frp_out_finish(&o);
    int e = errno;
    frp_out_free(&o);
    errno = e;
    return rc;
}

int frp_flame_sink(struct frp_report *r, const struct frp_opts *o, FILE *out, struct frp_sink *s)
{
    return frp_tree_sink(r, o, o->per_thread, frp_flame_write, out, s);
}
