"""vtop's rules as Prometheus alerting rules: what `vtop rules export` writes.

A fleet that runs Prometheus should not need vtop running to be told "the KV cache is the
wall"; the same rules, with the same thresholds, can be evaluated by Prometheus and routed by
Alertmanager. Rule conditions are structured data whose every measure is one PromQL function
(`vtop.triage.schema`), so the export is a translation, not a rewrite, and it is split by what
it translates, one module each:

- `measures`: every canonical signal as an aggregate per instance, aliases across vLLM
  versions joined by `or`, counters rated and histograms summed by `le`, gauge functions as
  subqueries (no recording rules needed); derived signals and context values as their table in
  `triage.derived` states; knobs as label-joined vectors;
- `formulas`: thresholds, values and recommendation formulas (Python expressions) as PromQL;
- `conditions`: `when` as a filter (`all` is `and`, `any` is `or`, `not` pushed down to the
  comparisons so unknown stays unknown, `if_known`, `share_over_time`);
- `alerts`: whole rules as alerting rules (recovery thresholds from Prometheus's own `ALERTS`
  state, escalations and the fast path as alerts of the same name, annotations for what
  Prometheus cannot do) and `explains` as Alertmanager inhibit rules;
- `files`: the rule file and the inhibit rules as YAML text;
- `terms`: what they all share (`Options`, `NotExpressible`, literals).

Knobs no metric exposes (`max_num_seqs`, `max_num_batched_tokens`, …) become label-joined
vectors, one value per instance, in this order: a series `vtop_knob_<name>{instance=…}` if
anyone publishes one, the per-instance values of `--targets FILE` labels, `--knob name=value`,
then vLLM's default (the same default vtop assumes); a knob with none of these leaves the
conditions that need it unknown, and such a rule is listed as not exported. Knobs that
`vllm:cache_config_info` carries as labels are compared by label when a condition tests them
for equality (`enable_prefix_caching == false`); PromQL cannot read a label as a number, so
numeric uses need a value as above. Each alert's annotations say which knobs it assumed and
how to set them, and carry the recommendation formula (with its PromQL, when it translates).

The package takes plain values and returns values: nothing here parses arguments, prints or
picks an exit code (`vtop.cli.rules_export` does). A rule PromQL cannot express is returned
with the reason (`Exported.skipped`); `NotExpressible` is the one error the translation raises.
"""

from vtop.triage.promql.alerts import Exported, alert_name, export
from vtop.triage.promql.files import inhibit_file, rule_file
from vtop.triage.promql.terms import NotExpressible, Options

__all__ = [
    "Exported",
    "NotExpressible",
    "Options",
    "alert_name",
    "export",
    "inhibit_file",
    "rule_file",
]
