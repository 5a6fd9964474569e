/* SPDX-License-Identifier: Apache-2.0 */
/* render_test.c - the tables of each view, and -o json|yaml, through
 * plugin/render.h, from rows as plugin/model.h makes them. */
#include "../../../common/common.h"
#include "../../../common/cfg.h"
#include "../../../plugin/render.h"
#include "../test.h"

static char *rendered(enum render_view v, enum render_format f, const char *rows_json, bool ns,
                      time_t now)
{
    struct strbuf sb = STRBUF_INIT;
    json_t *rows = json_loads(rows_json, 0, NULL);
    size_t len;

    CHECK(rows != NULL);
    CHECK_OK(render(v, f, rows, ns, now, &sb));
    json_decref(rows);
    return sb.buf ? strbuf_detach(&sb, &len) : strdup("");
}

static const char node_rows[] =
    "[{\"resource\":\"a.com/gpu\",\"id\":\"g0\",\"health\":\"Healthy\",\"numa\":[0,1],"
    "\"aliases\":[\"nvidia0\"],\"state\":\"held\",\"holder\":{\"namespace\":\"ml\",\"pod\":\"p1\","
    "\"container\":\"main\",\"phase\":\"Bound\"},\"since\":\"1970-01-01T00:00:00Z\"},"
    "{\"resource\":\"a.com/gpu\",\"id\":\"g1\",\"health\":\"Healthy\",\"numa\":[],\"aliases\":[],"
    "\"state\":\"free\",\"holder\":null,\"since\":null}]";

static void test_node(void)
{
    char *s = rendered(RENDER_NODE, RENDER_TABLE, node_rows, false, 185);

    /* ID: "g0" + 3 is 5, under kubectl's least width of 6. */
    CHECK_STREQ(s, "RESOURCE    ID    HEALTH    NUMA     STATE   HOLDER       SINCE\n"
                   "a.com/gpu   g0    Healthy   0,1      held    ml/p1/main   3m5s\n"
                   "a.com/gpu   g1    Healthy   <none>   free    <none>       <none>\n");
    free(s);
    s = rendered(RENDER_NODE, RENDER_WIDE, node_rows, false, 185);
    CHECK(strstr(s, "SINCE    ALIASES\n") != NULL);
    CHECK(strstr(s, "3m5s     nvidia0\n") != NULL);
    free(s);
}

static void test_who(void)
{
    char *s = rendered(
        RENDER_WHO, RENDER_TABLE,
        "[{\"node\":\"n1\",\"resource\":\"r/x\",\"id\":\"g0\",\"health\":\"Healthy\","
        "\"numa\":[0],\"aliases\":[],\"state\":\"free\",\"holder\":null,"
        "\"since\":null}]",
        false, 0);

    CHECK_STREQ(s, "NODE   RESOURCE   ID    HEALTH    STATE   HOLDER   SINCE\n"
                   "n1     r/x        g0    Healthy   free    <none>   <none>\n");
    free(s);
}

/* A DRA holder: the CLAIM column appears (<none> for other rows); -o wide
 * adds PHYSICAL when a row is a slice. */
static void test_claims(void)
{
    static const char rows[] =
        "[{\"node\":\"n1\",\"resource\":\"gpu.example.com\",\"id\":\"p/gpu-0\",\"health\":"
        "\"Healthy\",\"numa\":[],\"aliases\":[\"GPU-1\"],\"physical\":null,\"state\":\"free\","
        "\"holder\":null,\"since\":null},"
        "{\"node\":\"n1\",\"resource\":\"gpu.example.com\",\"id\":\"p/mig-0\",\"health\":"
        "\"Healthy\",\"numa\":[],\"aliases\":[],\"physical\":\"GPU-1\",\"state\":\"held\","
        "\"holder\":{\"namespace\":\"ml\",\"pod\":\"p1\",\"container\":\"main\",\"claim\":{"
        "\"namespace\":\"ml\",\"name\":\"c1\"}},\"since\":null}]";
    char *s = rendered(RENDER_WHO, RENDER_TABLE, rows, false, 0);

    CHECK_STREQ(
        s, "NODE   RESOURCE          ID        HEALTH    STATE   HOLDER       CLAIM    SINCE\n"
           "n1     gpu.example.com   p/gpu-0   Healthy   free    <none>       <none>   <none>\n"
           "n1     gpu.example.com   p/mig-0   Healthy   held    ml/p1/main   c1       <none>\n");
    free(s);
    s = rendered(RENDER_NODE, RENDER_WIDE, rows, false, 0);
    CHECK_STREQ(s, "RESOURCE          ID        HEALTH    NUMA     STATE   HOLDER       CLAIM    "
                   "SINCE    ALIASES   PHYSICAL\n"
                   "gpu.example.com   p/gpu-0   Healthy   <none>   free    <none>       <none>   "
                   "<none>   GPU-1     <none>\n"
                   "gpu.example.com   p/mig-0   Healthy   <none>   held    ml/p1/main   c1       "
                   "<none>   <none>    GPU-1\n");
    free(s);
}

static void test_nodes_and_pods(void)
{
    static const char pods[] = "[{\"namespace\":\"ml\",\"name\":\"p1\",\"node\":\"n1\",\"phase\":"
                               "\"Pending\",\"podUID\":\"\",\"summary\":\"\",\"deviceIds\":[\"g0\","
                               "\"g1\"],\"containers\":[]}]";
    char *s = rendered(RENDER_NODES, RENDER_TABLE,
                       "[{\"node\":\"n1\",\"resource\":\"r/x\",\"total\":4,\"healthy\":3,"
                       "\"unhealthy\":1,\"held\":1,\"reserved\":1,\"free\":1,\"pods\":2}]",
                       false, 0);

    CHECK_STREQ(s, "NODE   RESOURCE   TOTAL   HEALTHY   HELD   RESERVED   FREE\n"
                   "n1     r/x        4       3         1      1          1\n");
    free(s);
    s = rendered(RENDER_PODS, RENDER_TABLE, pods, true, 0);
    CHECK_STREQ(s, "NAMESPACE   NAME   NODE   PHASE     DEVICE-IDS\n"
                   "ml          p1     n1     Pending   g0,g1\n");
    free(s);
    s = rendered(RENDER_PODS, RENDER_WIDE, pods, false, 0);
    CHECK_STREQ(s, "NAME   NODE   PHASE     DEVICE-IDS   RESOURCES   POD-UID\n"
                   "p1     n1     Pending   g0,g1        <none>      <none>\n");
    free(s);
    s = rendered(RENDER_PODS, RENDER_TABLE, "[]", true, 0);
    CHECK_STREQ(s, ""); /* the caller says "No resources found" */
    free(s);
}

static void test_documents(void)
{
    char *s = rendered(RENDER_NODE, RENDER_JSON, node_rows, false, 0);
    struct error e = {0};
    json_t *doc = json_loads(s, 0, NULL), *back = NULL;

    CHECK(json_is_array(json_object_get(doc, "items")));
    CHECK_EQ_INT(json_array_size(json_object_get(doc, "items")), 2);
    free(s);
    s = rendered(RENDER_NODE, RENDER_YAML, node_rows, false, 0);
    CHECK_OK(cfg_yaml_parse(s, strlen(s), &back, &e));
    CHECK(json_equal(doc, back));
    free(s);
    json_decref(doc);
    json_decref(back);
}

static void test_formats(void)
{
    enum render_format f = RENDER_JSON;

    CHECK_OK(render_parse_format("", &f));
    CHECK_EQ_INT(f, RENDER_TABLE);
    CHECK_OK(render_parse_format("yaml", &f));
    CHECK_EQ_INT(f, RENDER_YAML);
    CHECK_EQ_INT(render_parse_format("xml", &f), ERR_INVAL);
    CHECK_EQ_INT(f, RENDER_YAML);
}

TEST_MAIN(test_node, test_who, test_claims, test_nodes_and_pods, test_documents, test_formats)
