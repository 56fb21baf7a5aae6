/* coord_runner: a job from start to end on its own thread — the attempts of its way of running (parameter_server
   closures or the ring), recovery between them, evaluation, the final state. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "coord_runner.h"
#include "coord_runner_ps.h"
#include "coord_runner_ring.h"
#include "zdist/sys.h"

/* Attempts until one ends other than by a loss (-EAGAIN), waiting for what
   was lost between them: 0 done, 1 stopped, or a negative errno. */
static int
s_attempts(coord_run_t *r)
{
    for (;;) {
        int rc = r->ops->attempt(r);
        if (rc != -EAGAIN)
            return rc;
        if (!r->ops->wait(r))
            return 1;
    }
}

static void
s_evaluate(coord_run_t *r)
{
    zdist_evaluation_t ev;
    zdist_error_t err = {0};
    if (r->ops->evaluate(r, &ev, &err) == 0 && ev.total > 0) {
        r->evaluated = true;
        r->test_accuracy = ev.has_correct ? (double)ev.correct / (double)ev.total : NAN;
        r->test_loss = ev.loss_sum / (double)ev.total;
        r->test_auc = ev.has_auc ? ev.auc : NAN;
        r->test_examples = ev.total;
        zsys_info("job %s: test accuracy %.4f, loss %.4f, auc %.4f over %lld examples", r->cfg->job_id,
                  r->test_accuracy, r->test_loss, r->test_auc, (long long)ev.total);
        coord_run_eval_line(r);
    } else {
        zsys_warning("job %s: evaluation failed: %s", r->cfg->job_id, err.text);
    }
}

void
coord_runner_actor(zsock_t *pipe, void *args)
{
    coord_run_t *r = calloc(1, sizeof *r);
    coord_run_config_t *cfg = args;
    zsock_signal(pipe, 0);
    if (!r) {
        coord_run_config_destroy(&cfg);
        return;
    }
    /* tpu: whole replicas per worker, as multi_worker_mirrored */
    bool ring = zdist_strategy_syncs_workers(cfg->job.spec.strategy);
    coord_run_init(r, cfg, pipe, ring ? &coord_runner_ring_ops : &coord_runner_ps_ops);
    int rc = r->ops->start ? r->ops->start(r) : 0;
    coord_run_status(r, true);
    if (rc == 0)
        rc = s_attempts(r);
    if (rc == 0 && cfg->job.spec.evaluate)
        s_evaluate(r);
    if (rc == 0) {
        if (r->ops->finish)
            r->ops->finish(r);
        r->state = "done";
    } else if (rc == 1) {
        r->state = r->cancel ? "cancelled" : "running";
    } else {
        r->state = "failed";
    }
    if (!(rc == 1 && !r->cancel))
        r->ops->stop(r);
    coord_run_svg(r);
    coord_run_end(r);
    coord_run_release(r);
    free(r);
    /* zactor_destroy's $TERM may be pending: wait for it when asked to stop. */
}
