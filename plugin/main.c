/* SPDX-License-Identifier: Apache-2.0 */
/* main.c - kubectl-podres, the kubectl plugin: `kubectl podres nodes|node
 * NODE|who DEVICE|pods`, reading NodeDevices and DeviceBindings with one list
 * each. Flags as kubectl takes them (--kubeconfig, --context, -n, -A, -o),
 * anywhere on the line. Exit 0 with the answer on stdout, 1 with one line on
 * stderr. */
#define LOG_MOD "main"
#include "../common/common.h"
#include "../common/strbuf.h"
#include "../kube/kubeconfig.h"
#include "../kube/rest.h"
#include "client.h"
#include "escape.h"
#include "model.h"
#include "render.h"

#include <getopt.h>
#include <stdarg.h>
#include <time.h>

#define GROUP_PATH "/apis/podres.dev/v1alpha1"
#define RES_ND "nodedevices.podres.dev"
#define RES_DVB "devicebindings.podres.dev"
#define PROG "kubectl-podres"

struct cli {
    const char *sub;        /* nodes, node, who, pods; NULL: none given */
    const char *arg;        /* NODE or DEVICE */
    const char *kubeconfig; /* --kubeconfig */
    const char *context;    /* --context */
    const char *ns;         /* -n */
    bool all;               /* -A */
    const char *output;     /* -o */
    bool help;              /* --help */
    int extra;              /* arguments beyond what the subcommand takes */
};

static const char usage_main[] =
    "Show which pod holds which device, from podres's NodeDevices and DeviceBindings.\n"
    "\n"
    "Commands:\n"
    "  nodes          one line per node and resource: total, healthy, held, reserved, free\n"
    "  node NODE      one line per device of NODE: health, NUMA, state, holder, since\n"
    "  who DEVICE     which pod holds DEVICE (an id, an alias or a physical device), on which\n"
    "                 node\n"
    "  pods           pods with devices and their device ids (-n NS, or -A)\n"
    "\n"
    "Options:\n"
    "  -o, --output=''      json, yaml or wide\n"
    "  -n, --namespace=''   the namespace (pods); default: the context's\n"
    "  -A, --all-namespaces all namespaces (pods)\n"
    "      --kubeconfig=''  the kubeconfig file (else $KUBECONFIG, else ~/.kube/config)\n"
    "      --context=''     the kubeconfig context to use\n"
    "      --version        print the version\n"
    "\n"
    "Usage:\n"
    "  kubectl podres COMMAND [options]\n"
    "\n"
    "Use \"kubectl podres COMMAND --help\" for more about a command.\n";

static const char usage_nodes[] =
    "One line per node and resource: TOTAL devices, HEALTHY, HELD (bound to a pod), RESERVED\n"
    "(pre-assigned by a scheduler, not yet Bound), FREE (healthy, neither held nor reserved).\n"
    "-o wide adds UNHEALTHY and PODS (pods holding or reserving).\n"
    "\n"
    "Usage:\n"
    "  kubectl podres nodes [-o json|yaml|wide] [--kubeconfig=''] [--context='']\n";

static const char usage_node[] =
    "One line per device of NODE: RESOURCE, ID, HEALTH, NUMA nodes, STATE (held, reserved,\n"
    "free, unhealthy), HOLDER (namespace/pod/container of the holder or the reservation),\n"
    "CLAIM (the ResourceClaim of a DRA device's holder; shown when there is one) and SINCE\n"
    "(how long: since the pod's pre-assignment was honoured, else since its DeviceBinding\n"
    "was created). -o wide adds ALIASES, and PHYSICAL when a device is a slice or replica.\n"
    "\n"
    "Usage:\n"
    "  kubectl podres node NODE [-o json|yaml|wide] [--kubeconfig=''] [--context='']\n";

static const char usage_who[] =
    "Which pod holds DEVICE, found by its id or any of its aliases (index, PCI address,\n"
    "UUID), on every node; several lines when several devices answer to the name. A\n"
    "physical device answers with every slice or replica of it (a GPU's MIG instances,\n"
    "their time-sliced replicas) and their holders; a DRA device's holder shows its\n"
    "ResourceClaim (CLAIM). -o wide adds NUMA, ALIASES, and PHYSICAL when a device is a\n"
    "slice or replica.\n"
    "\n"
    "Usage:\n"
    "  kubectl podres who DEVICE [-o json|yaml|wide] [--kubeconfig=''] [--context='']\n";

static const char usage_pods[] =
    "Pods with devices, one line each: NAME, NODE, PHASE of the DeviceBinding and the\n"
    "DEVICE-IDS it holds (or, not yet Bound, has reserved). -o wide adds RESOURCES, POD-UID.\n"
    "\n"
    "Usage:\n"
    "  kubectl podres pods [-n NS | -A] [-o json|yaml|wide] [--kubeconfig=''] [--context='']\n";

static const struct option long_opts[] = {
    {"output", required_argument, NULL, 'o'},   {"namespace", required_argument, NULL, 'n'},
    {"all-namespaces", no_argument, NULL, 'A'}, {"kubeconfig", required_argument, NULL, 'k'},
    {"context", required_argument, NULL, 'c'},  {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},        {NULL, 0, NULL, 0},
};

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...)
{
    struct strbuf sb = STRBUF_INIT;
    char msg[2048];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    /* The message may quote the API server or an argument: escaped like a table cell. */
    if (escape_terminal(&sb, msg))
        fputs("error: out of memory\n", stderr);
    else
        fprintf(stderr, "error: %s\n", sb.buf ? sb.buf : "");
    strbuf_release(&sb);
    return 1;
}

static const char *usage_of(const char *sub)
{
    if (!sub)
        return usage_main;
    if (strcmp(sub, "nodes") == 0)
        return usage_nodes;
    if (strcmp(sub, "node") == 0)
        return usage_node;
    if (strcmp(sub, "who") == 0)
        return usage_who;
    if (strcmp(sub, "pods") == 0)
        return usage_pods;
    return NULL;
}

/* One option into 'cli'; -1 for an unknown one, 2 for --version. */
static int take_opt(int ch, struct cli *cli)
{
    switch (ch) {
    case 'o':
        cli->output = optarg;
        return 0;
    case 'n':
        cli->ns = optarg;
        return 0;
    case 'A':
        cli->all = true;
        return 0;
    case 'k':
        cli->kubeconfig = optarg;
        return 0;
    case 'c':
        cli->context = optarg;
        return 0;
    case 'h':
        cli->help = true;
        return 0;
    case 'V':
        return 2;
    default:
        return -1;
    }
}

/* Options anywhere, then the subcommand and its argument. */
static int parse_cli(int argc, char **argv, struct cli *cli)
{
    int ch, r, i;

    opterr = 0;
    while ((ch = getopt_long(argc, argv, "o:n:Ah", long_opts, NULL)) != -1) {
        r = take_opt(ch, cli);
        if (r == 2)
            return 2;
        if (r < 0) {
            if (optopt)
                return fail("unknown shorthand flag or missing value: '-%c'", optopt);
            return fail("unknown flag or missing value: %s", argv[optind - 1]);
        }
    }
    for (i = optind; i < argc; i++) {
        if (!cli->sub && strcmp(argv[i], "help") == 0 && !cli->help)
            cli->help = true;
        else if (!cli->sub)
            cli->sub = argv[i];
        else if (!cli->arg)
            cli->arg = argv[i];
        else
            cli->extra++;
    }
    return 0;
}

/* What the subcommand needs, checked; 0 to go on. */
static int check_cli(const struct cli *cli, enum render_format *fmt)
{
    bool takes_arg;

    if (!usage_of(cli->sub))
        return fail("unknown command \"%s\" for \"kubectl podres\"; see 'kubectl podres --help'",
                    cli->sub);
    if (render_parse_format(cli->output ? cli->output : "", fmt))
        return fail("unable to match a printer suitable for the output format \"%s\", the "
                    "allowed formats are: json,yaml,wide",
                    cli->output);
    takes_arg = strcmp(cli->sub, "node") == 0 || strcmp(cli->sub, "who") == 0;
    if (takes_arg && !cli->arg)
        return fail("%s needs a %s: kubectl podres %s %s", cli->sub,
                    cli->sub[0] == 'n' ? "node name" : "device id or alias", cli->sub,
                    cli->sub[0] == 'n' ? "NODE" : "DEVICE");
    if (cli->extra || (!takes_arg && cli->arg))
        return fail("too many arguments for \"kubectl podres %s\"; see 'kubectl podres %s --help'",
                    cli->sub, cli->sub);
    if (cli->all && cli->ns)
        return fail("-A and -n cannot be used together");
    return 0;
}

/* ---- the views ---- */

struct lists {
    json_t *nds;  /* NodeDevicesList, or NULL when not needed */
    json_t *dvbs; /* DeviceBindingList */
};

static int fetch(struct client *c, const struct cli *cli, struct lists *l, const char **ns)
{
    char path[600], esc[400];
    struct error e = {0};

    *ns = NULL;
    if (strcmp(cli->sub, "pods") != 0 &&
        client_list(c, GROUP_PATH "/nodedevices", RES_ND, &l->nds, &e))
        return fail("%s", error_msg(&e));
    if (strcmp(cli->sub, "pods") == 0 && !cli->all) {
        *ns = cli->ns ? cli->ns : client_namespace(c);
        rest_escape(*ns, esc, sizeof(esc));
        snprintf(path, sizeof(path), GROUP_PATH "/namespaces/%s/devicebindings", esc);
    } else {
        snprintf(path, sizeof(path), GROUP_PATH "/devicebindings");
    }
    if (client_list(c, path, RES_DVB, &l->dvbs, &e))
        return fail("%s", error_msg(&e));
    return 0;
}

/* The rows of the subcommand; 1 (said) for an unknown node or device. */
static int compute(const struct cli *cli, const struct lists *l, enum render_view *view,
                   json_t **rows)
{
    bool found = true;

    if (strcmp(cli->sub, "nodes") == 0) {
        *view = RENDER_NODES;
        *rows = model_nodes(l->nds, l->dvbs);
    } else if (strcmp(cli->sub, "node") == 0) {
        *view = RENDER_NODE;
        *rows = model_node(l->nds, l->dvbs, cli->arg, &found);
    } else if (strcmp(cli->sub, "who") == 0) {
        *view = RENDER_WHO;
        *rows = model_who(l->nds, l->dvbs, cli->arg);
        found = !*rows || json_array_size(*rows) > 0;
    } else {
        *view = RENDER_PODS;
        *rows = model_pods(l->dvbs);
    }
    if (!*rows)
        return fail("out of memory");
    if (found)
        return 0;
    json_decref(*rows);
    *rows = NULL;
    if (*view == RENDER_NODE)
        return fail("node \"%s\" has no NodeDevices (no such node, or no podres-syncer on it)",
                    cli->arg);
    return fail("no device \"%s\" on any node (by id, alias or physical device)", cli->arg);
}

static int print(const struct cli *cli, enum render_view view, enum render_format fmt,
                 const json_t *rows, const char *ns)
{
    struct strbuf sb = STRBUF_INIT;
    err_t rc = render(view, fmt, rows, view == RENDER_PODS && !ns, time(NULL), &sb);

    if (rc) {
        strbuf_release(&sb);
        return fail("cannot print: %s", err_str(rc));
    }
    if (sb.len)
        fwrite(sb.buf, 1, sb.len, stdout);
    else if (ns)
        fprintf(stderr, "No resources found in %s namespace.\n", ns);
    else if (strcmp(cli->sub, "node") != 0)
        fprintf(stderr, "No resources found\n");
    strbuf_release(&sb);
    return fflush(stdout) == 0 ? 0 : fail("cannot write the output: %s", strerror(errno));
}

static int run(const struct cli *cli, enum render_format fmt)
{
    const struct kubeconfig_sel sel = {cli->kubeconfig, cli->context, true};
    struct lists l = {NULL, NULL};
    struct client *c = NULL;
    enum render_view view = RENDER_NODES;
    json_t *rows = NULL;
    const char *ns = NULL;
    struct error e = {0};
    int r;

    if (client_open(&sel, &c, &e))
        return fail("%s", error_msg(&e));
    r = fetch(c, cli, &l, &ns);
    if (!r)
        r = compute(cli, &l, &view, &rows);
    if (!r)
        r = print(cli, view, fmt, rows, ns);
    json_decref(rows);
    json_decref(l.nds);
    json_decref(l.dvbs);
    client_free(c);
    return r;
}

int main(int argc, char **argv)
{
    struct cli cli = {0};
    enum render_format fmt = RENDER_TABLE;
    int r = parse_cli(argc, argv, &cli);

    if (r == 2) {
        printf("%s %s\n", PROG, PODRES_VERSION);
        return 0;
    }
    if (r)
        return r;
    if (cli.help || !cli.sub) {
        if (!usage_of(cli.sub))
            return fail("unknown command \"%s\" for \"kubectl podres\"", cli.sub);
        fputs(usage_of(cli.sub), stdout);
        return 0;
    }
    r = check_cli(&cli, &fmt);
    if (r)
        return r;
    fault_init();
    if (log_setup("text", "err") || rest_global_init())
        return fail("cannot initialise libcurl");
    r = run(&cli, fmt);
    rest_global_cleanup();
    return r;
}
