"""Component ids of every page, defined once (callbacks and tests import them from here)."""

# shell
NAV_URL = "nav-url"              # dcc.Location used by pages to navigate from a callback
NAV_STORE_PATH = "nav-store-path"

# runs page
RUNS_GRID = "runs-grid"
RUNS_INTERVAL = "runs-interval"
RUNS_SUMMARY = "runs-summary"
RUNS_COMPARE = "runs-compare"    # "compare ticked runs" button

# run overview
OV_RUN = "ov-run"                # run picker
OV_HEADER = "ov-header"
OV_GRAPH = "ov-graph"
OV_SMOOTH = "ov-smooth"
OV_STATE = "ov-state"            # dcc.Store: run, rank, last step drawn, summary, events key, status
OV_INTERVAL = "ov-interval"
OV_EVENTS = "ov-events"          # the events table (the run's story)
OV_VERDICT_BOX = "ov-verdict-box"  # the verdict line and the rules note
OV_VERDICT = "ov-verdict"        # the verdict line itself (healthy / warning / collapsed + sentence)
OV_RULES_NOTE = "ov-rules-note"  # "showing today's rules' episodes, computed on read …"
OV_TIMELINE = "ov-timeline"      # phase timeline figure, aligned with the panel columns
OV_BAND = "ov-band"              # dcc.Store written by the browser: the episode whose band is shown
OV_ZOOM = "ov-zoom"              # dcc.Store written by the browser: the panels' x range
OV_CROSSHAIR = "ov-crosshair"    # dcc.Store written by the browser: the hovered step, drawn on every panel
OV_CONFIG = "ov-config"
OV_CSV = "ov-csv"                # "data CSV" button and its download
OV_DOWNLOAD = "ov-download"
OV_WAIT = "ov-wait"              # interval of the page that waits for a run to appear
OV_WAIT_BOX = "ov-wait-box"

# tokens
TK_RUN = "tk-run"
TK_STEP = "tk-step"
TK_SEQ = "tk-seq"
TK_METRIC = "tk-metric"
TK_SEQ_INFO = "tk-seq-info"
TK_TEXT = "tk-text"
TK_LEGEND = "tk-legend"
TK_HEATMAP = "tk-heatmap"
TK_RANK = "tk-rank"              # sequence order (worst repetition, highest entropy, …)
TK_SCALE = "tk-scale"            # heatmap colour scale: this run / fixed
TK_WAIT = "tk-wait"
TK_WAIT_BOX = "tk-wait-box"

# compare
CMP_RUNS = "cmp-runs"
CMP_METRICS = "cmp-metrics"
CMP_GRAPH = "cmp-graph"
CMP_SMOOTH = "cmp-smooth"
CMP_ALIGN = "cmp-align"          # align at step 0 / first episode / collapse step
CMP_LOG = "cmp-log"              # panels on a log y axis
CMP_NOTE = "cmp-note"
CMP_CONFIG = "cmp-config"        # config keys that differ between the runs
CMP_CSV = "cmp-csv"
CMP_DOWNLOAD = "cmp-download"

# SQL console
SQL_INPUT = "sql-input"
SQL_RUN = "sql-run"
SQL_MESSAGE = "sql-message"
SQL_GRID = "sql-grid"
SQL_X = "sql-x"
SQL_Y = "sql-y"
SQL_KIND = "sql-kind"
SQL_CHART = "sql-chart"
SQL_CSV = "sql-csv"
SQL_DOWNLOAD = "sql-download"
SQL_COLUMNS = "sql-columns"      # the column browser
SQL_RESULT = "sql-result"        # dcc.Store: the last result (records, capped) for the quick chart

# runs page: grouping and filtering
RUNS_GROUP = "runs-group"        # group by: verdict, status, objective or a config axis
RUNS_VERDICT = "runs-verdict"    # verdicts shown
RUNS_GROUPS = "runs-groups"      # one line per group: runs and verdict counts
RUNS_HELD = "runs-held"          # the token of the rows the runs grid holds (pages.runs.hold)

# sweep
SW_FILTER = "sw-filter"          # run name prefix or glob
SW_SUMMARY = "sw-summary"
SW_NOTE = "sw-note"              # the sentence said instead of a chart (one run, no varying key) and runs without a config
SW_GRAPH = "sw-graph"            # parallel coordinates: config axes, collapse step, verdict
SW_GRID = "sw-grid"              # runs × axes, each run linked to its page
SW_INTERVAL = "sw-interval"
SW_DIGEST = "sw-digest"          # dcc.Store: what the chart and table were drawn from (a refresh redraws on change)
