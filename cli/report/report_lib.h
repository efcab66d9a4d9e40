/*
 * report_lib.h - the whole report library, for ftrace-report and the tests: every module's
 * header (report.h lists the layers).
 */
#ifndef FTR_REPORT_LIB_H
#define FTR_REPORT_LIB_H

#include "callgraph.h"
#include "chrome.h"
#include "drive.h"
#include "flame.h"
#include "folded.h"
#include "graph.h"
#include "info.h"
#include "merge.h"
#include "names.h"
#include "render.h"
#include "report.h"
#include "sink.h"
#include "summary.h"
#include "tables.h"
#include "tree.h"
#include "util.h"
#include "values.h"

#endif /* FTR_REPORT_LIB_H */
