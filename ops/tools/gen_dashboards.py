#!/usr/bin/env python3
"""Generates the Grafana dashboards in grafana/*.json (the JSON files are committed; this is their
source). Run `python3 ops/tools/gen_dashboards.py` after editing, or `--check` to verify that the
committed JSON is what this script produces (scripts/check-observability.sh does).

Every query uses only metrics from README.md's "Metrics" table (core/src/metrics.rs `CATALOGUE`)
and the Prometheus built-in `up`; ops/tools/check_metric_names.py enforces that.
"""
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "grafana"

DS = {"type": "prometheus", "uid": "${datasource}"}
I = 'instance=~"$instance"'  # every selector is scoped to the chosen seeds
T = 'tenant=~"$tenant"'  # per-tenant selectors are also scoped to the chosen tenants
RATE = "$__rate_interval"
INVENTORY_CAP = 2973  # Radicle's inventory announcement limit (RIDs per message)


class Layout:
    """Places panels left to right, wrapping at 24 columns; rows span the full width."""

    def __init__(self):
        self.x = 0
        self.y = 0
        self.row_h = 0
        self.next_id = 1

    def id(self):
        i = self.next_id
        self.next_id += 1
        return i

    def place(self, w, h):
        if self.x + w > 24:
            self.x = 0
            self.y += self.row_h
            self.row_h = 0
        pos = {"h": h, "w": w, "x": self.x, "y": self.y}
        self.x += w
        self.row_h = max(self.row_h, h)
        return pos

    def row(self, title):
        if self.x:
            self.y += self.row_h
        self.x, self.row_h = 0, 0
        pos = {"h": 1, "w": 24, "x": 0, "y": self.y}
        self.y += 1
        return {
            "collapsed": False,
            "gridPos": pos,
            "id": self.id(),
            "panels": [],
            "title": title,
            "type": "row",
        }


def target(expr, legend="__auto", ref="A", fmt=None, instant=False):
    t = {"datasource": DS, "expr": expr, "legendFormat": legend, "refId": ref}
    if fmt:
        t["format"] = fmt
    if instant:
        t["instant"] = True
        t["range"] = False
    return t


def targets(queries, **kw):
    out = []
    for i, q in enumerate(queries):
        expr, legend = q if isinstance(q, tuple) else (q, "__auto")
        out.append(target(expr, legend, ref=chr(ord("A") + i), **kw))
    return out


def thresholds(steps):
    """steps: [(value or None, colour)], first value None (base)."""
    return {
        "mode": "absolute",
        "steps": [{"color": c, "value": v} for v, c in steps],
    }


GREEN = [(None, "green")]
QUOTA_STEPS = [(None, "green"), (0.9, "orange"), (1, "red")]  # SeeddTenantNear/OverQuota


def timeseries(lay, title, queries, unit="short", desc="", w=12, h=8, stack=False,
               steps=None, line_at=None, min0=True, legend_calcs=("mean", "max", "lastNotNull")):
    custom = {
        "drawStyle": "line",
        "lineWidth": 1,
        "fillOpacity": 10 if not stack else 30,
        "showPoints": "never",
        "spanNulls": False,
        "stacking": {"group": "A", "mode": "normal" if stack else "none"},
    }
    defaults = {"custom": custom, "unit": unit, "color": {"mode": "palette-classic"}}
    if min0:
        defaults["min"] = 0
    if line_at is not None:
        defaults["thresholds"] = thresholds([(None, "transparent"), (line_at, "red")])
        custom["thresholdsStyle"] = {"mode": "line"}
    elif steps:
        defaults["thresholds"] = thresholds(steps)
    return {
        "datasource": DS,
        "description": desc,
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "gridPos": lay.place(w, h),
        "id": lay.id(),
        "options": {
            "legend": {
                "calcs": list(legend_calcs),
                "displayMode": "table",
                "placement": "bottom",
                "showLegend": True,
            },
            "tooltip": {"mode": "multi", "sort": "desc"},
        },
        "targets": targets(queries),
        "title": title,
        "type": "timeseries",
    }


def stat(lay, title, queries, unit="short", desc="", w=4, h=4, steps=None, mappings=None,
         text_mode="auto", color_mode="value", decimals=None, instant=True, graph=False):
    defaults = {
        "color": {"mode": "thresholds"},
        "thresholds": thresholds(steps or GREEN),
        "unit": unit,
    }
    if mappings:
        defaults["mappings"] = mappings
    if decimals is not None:
        defaults["decimals"] = decimals
    return {
        "datasource": DS,
        "description": desc,
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "gridPos": lay.place(w, h),
        "id": lay.id(),
        "options": {
            "colorMode": color_mode,
            "graphMode": "area" if graph else "none",
            "justifyMode": "auto",
            "orientation": "auto",
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "textMode": text_mode,
        },
        "targets": targets(queries, instant=instant),
        "title": title,
        "type": "stat",
    }


def bargauge(lay, title, queries, unit="short", desc="", w=8, h=6, max_=None, steps=None):
    defaults = {
        "color": {"mode": "thresholds"},
        "thresholds": thresholds(steps or GREEN),
        "unit": unit,
        "min": 0,
    }
    if max_ is not None:
        defaults["max"] = max_
    return {
        "datasource": DS,
        "description": desc,
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "gridPos": lay.place(w, h),
        "id": lay.id(),
        "options": {
            "displayMode": "gradient",
            "orientation": "horizontal",
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "showUnfilled": True,
        },
        "targets": targets(queries, instant=True),
        "title": title,
        "type": "bargauge",
    }


def heatmap(lay, title, expr, desc="", w=12, h=8):
    return {
        "datasource": DS,
        "description": desc,
        "fieldConfig": {"defaults": {"custom": {"scaleDistribution": {"type": "linear"}}},
                        "overrides": []},
        "gridPos": lay.place(w, h),
        "id": lay.id(),
        "options": {
            "calculate": False,
            "cellGap": 1,
            "color": {"mode": "scheme", "scheme": "Oranges", "steps": 64},
            "yAxis": {"unit": "s"},
            "rowsFrame": {"layout": "auto"},
            "tooltip": {"mode": "single", "yHistogram": False},
        },
        "targets": [target(expr, "{{le}}", fmt="heatmap")],
        "title": title,
        "type": "heatmap",
    }


def up_mapping():
    return [{
        "type": "value",
        "options": {
            "0": {"color": "red", "index": 0, "text": "DOWN"},
            "1": {"color": "green", "index": 1, "text": "UP"},
        },
    }]


def variables(tenant=False):
    return [
        {
            "name": "datasource",
            "label": "Data source",
            "type": "datasource",
            "query": "prometheus",
            "hide": 0,
            "includeAll": False,
            "multi": False,
            "refresh": 1,
            "regex": "",
        },
        {
            "name": "instance",
            "label": "Seed",
            "description": "seedd admin endpoints (label_values of seedd_build_info)",
            "type": "query",
            "datasource": DS,
            "query": {
                "query": "label_values(seedd_build_info, instance)",
                "refId": "PrometheusVariableQueryEditor-VariableQuery",
                "qryType": 1,
            },
            "hide": 0,
            "includeAll": True,
            "allValue": ".+",
            "multi": True,
            "refresh": 2,
            "regex": "",
            "sort": 1,
            "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        },
    ] + ([tenant_variable()] if tenant else [])


def tenant_variable():
    return {
        "name": "tenant",
        "label": "Tenant",
        "description": "seedd tenants on the chosen seeds (label_values of seedd_tenant_repos)",
        "type": "query",
        "datasource": DS,
        "query": {
            "query": f"label_values(seedd_tenant_repos{{{I}}}, tenant)",
            "refId": "PrometheusVariableQueryEditor-VariableQuery",
            "qryType": 1,
        },
        "hide": 0,
        "includeAll": True,
        "allValue": ".+",
        "multi": True,
        "refresh": 2,
        "regex": "",
        "sort": 1,
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
    }


def dashboard(uid, title, desc, panels, tags=(), tenant=False):
    return {
        "annotations": {"list": [{
            "builtIn": 1,
            "datasource": {"type": "grafana", "uid": "-- Grafana --"},
            "enable": True,
            "hide": True,
            "iconColor": "rgba(0, 211, 255, 1)",
            "name": "Annotations & Alerts",
            "type": "dashboard",
        }]},
        "description": desc,
        "editable": True,
        "fiscalYearStartMonth": 0,
        "graphTooltip": 1,
        "id": None,
        "links": [{
            "asDropdown": True,
            "icon": "external link",
            "includeVars": True,
            "keepTime": True,
            "tags": ["seedd"],
            "targetBlank": False,
            "title": "seedd dashboards",
            "tooltip": "",
            "type": "dashboards",
            "url": "",
        }],
        "liveNow": False,
        "panels": panels,
        "refresh": "30s",
        "schemaVersion": 39,
        "tags": ["seedd", "radicle", *tags],
        "templating": {"list": variables(tenant)},
        "time": {"from": "now-6h", "to": "now"},
        "timepicker": {},
        "timezone": "browser",
        "title": title,
        "uid": uid,
        "version": 1,
        "weekStart": "",
    }


def clone_quantile(q, by="le"):
    return (f"histogram_quantile({q}, sum by ({by}) "
            f"(rate(seedd_git_clone_duration_seconds_bucket{{{I}}}[{RATE}])))")


# ---------------------------------------------------------------------------------------------
def overview():
    lay = Layout()
    p = [lay.row("Health")]
    p.append(stat(lay, "Scrape status", [(f'up{{{I}}}', "{{instance}}")],
                  desc="Prometheus `up` for each seedd admin endpoint (1 = scraped).",
                  mappings=up_mapping(), steps=[(None, "red"), (1, "green")],
                  color_mode="background", w=4))
    p.append(stat(lay, "Version", [(f"seedd_build_info{{{I}}}", "{{instance}}: {{version}}")],
                  desc="seedd_build_info: the running build (the series name carries the version).",
                  text_mode="name", w=5))
    p.append(stat(lay, "Repositories", [
        (f'sum(seedd_repos_indexed{{{I}, visibility="public"}})', "public"),
        (f'sum(seedd_repos_indexed{{{I}, visibility="private"}})', "private"),
    ], desc="Repositories in the index, by visibility.", w=4, text_mode="value_and_name"))
    p.append(stat(lay, "Connected peers", [
        (f'sum(seedd_p2p_sessions{{{I}, state="connected", link="inbound"}})', "inbound"),
        (f'sum(seedd_p2p_sessions{{{I}, state="connected", link="outbound"}})', "outbound"),
    ], desc="Radicle peer sessions past the handshake. 0 for a long time: see the SeeddNoPeers alert.",
        steps=[(None, "orange"), (1, "green")], w=4, text_mode="value_and_name"))
    p.append(stat(lay, "Data dir free", [
        (f"min(seedd_data_dir_free_bytes{{{I}}} / seedd_data_dir_capacity_bytes{{{I}}})", "free"),
    ], unit="percentunit", desc="Lowest free fraction of the filesystem holding data_dir.",
        steps=[(None, "red"), (0.1, "orange"), (0.2, "green")], decimals=1, w=3))
    p.append(stat(lay, "Announced inventory", [
        (f'sum(seedd_p2p_inventory_repos{{{I}, state="announced"}})', "announced"),
        (f'sum(seedd_p2p_inventory_repos{{{I}, state="unannounced"}})', "over the cap"),
    ], desc=f"Public repositories announced to peers; Radicle's cap is {INVENTORY_CAP} per "
            "announcement, repositories beyond it are not announced.",
        steps=[(None, "green"), (2700, "orange"), (INVENTORY_CAP, "red")], w=4,
        text_mode="value_and_name"))

    p.append(lay.row("Traffic"))
    p.append(timeseries(lay, "HTTP requests by status", [
        (f"sum by (status) (rate(seedd_http_requests_total{{{I}}}[{RATE}]))", "{{status}}"),
    ], unit="reqps", desc="Git smart-HTTP requests answered per second, by status code.", stack=True))
    p.append(timeseries(lay, "HTTP error ratio", [
        (f'sum(rate(seedd_http_requests_total{{{I}, status=~"5.."}}[{RATE}])) '
         f"/ sum(rate(seedd_http_requests_total{{{I}}}[{RATE}]))", "5xx"),
        (f'sum(rate(seedd_http_requests_total{{{I}, status=~"4.."}}[{RATE}])) '
         f"/ sum(rate(seedd_http_requests_total{{{I}}}[{RATE}]))", "4xx"),
    ], unit="percentunit", desc="Share of HTTP answers that are errors. 503s are pack-queue "
                                 "back-pressure (see Serving); 404s include unknown and private repositories."))
    p.append(timeseries(lay, "Clone latency", [
        (clone_quantile(0.5), "p50"),
        (clone_quantile(0.95), "p95"),
    ], unit="s", desc="git upload-pack responses over HTTP, request to last byte (all protocols)."))
    p.append(timeseries(lay, "Peer sessions", [
        (f'sum by (link) (seedd_p2p_sessions{{{I}, state="connected"}})', "{{link}}"),
        (f'sum(seedd_p2p_sessions{{{I}, state="handshake"}})', "handshaking"),
    ], desc="Connected Radicle peers by direction, and sessions still in the Noise handshake."))
    p.append(timeseries(lay, "Data dir free space", [
        (f"seedd_data_dir_free_bytes{{{I}}}", "{{instance}} free"),
        (f"seedd_data_dir_capacity_bytes{{{I}}}", "{{instance}} capacity"),
    ], unit="bytes", desc="Filesystem holding data_dir. Growth forecast: Storage dashboard."))
    p.append(timeseries(lay, "Gossip traffic", [
        (f'sum(rate(seedd_p2p_message_bytes_total{{{I}, direction="in"}}[{RATE}]))', "in"),
        (f'sum(rate(seedd_p2p_message_bytes_total{{{I}, direction="out"}}[{RATE}]))', "out"),
    ], unit="binBps", desc="Radicle frame bytes received and sent (all message types)."))

    p.append(lay.row("Tenants"))
    p.append(stat(lay, "Tenants", [
        (f'sum(seedd_tenants{{{I}, state="active"}})', "active"),
        (f'sum(seedd_tenants{{{I}, state="suspended"}})', "suspended"),
    ], desc="Tenants by state on the chosen seeds (not filtered by $tenant). Details: Tenants "
            "dashboard.", w=4, h=8, text_mode="value_and_name"))
    p.append(bargauge(lay, "Quota usage (top 10)", [
        (f"topk(10, max by (tenant, quota) (seedd_tenant_quota_usage_ratio{{{I}, {T}}}))",
         "{{tenant}} {{quota}}"),
    ], unit="percentunit", desc="Usage over limit of the fullest tenant quotas (repos, bytes, "
                                "egress per day); unlimited quotas have no series. "
                                "SeeddTenantNearQuota at 90 %, SeeddTenantOverQuota at 100 %.",
        max_=1, steps=QUOTA_STEPS, w=8, h=8))
    p.append(timeseries(lay, "HTTP requests by tenant", [
        (f"sum by (tenant) (rate(seedd_tenant_http_requests_total{{{I}, {T}}}[{RATE}]))",
         "{{tenant}}"),
    ], unit="reqps", desc="Git smart-HTTP requests on each tenant's hostnames per second.",
        stack=True, w=12))
    return dashboard("seedd-overview", "seedd / Overview",
                     "One screen per seed: up, version, repositories, peers, HTTP traffic and "
                     "errors, clone latency, disk; tenants and their quotas.", p, tenant=True)


def p2p():
    lay = Layout()
    p = [lay.row("Sessions")]
    p.append(timeseries(lay, "Sessions by link and state", [
        (f"sum by (link, state) (seedd_p2p_sessions{{{I}}})", "{{link}} {{state}}"),
    ], desc="Peer sessions: inbound/outbound × handshake/connected (inbound limit "
            "p2p.max_inbound, default 128; outbound p2p.max_outbound, default 16).", w=8))
    p.append(timeseries(lay, "Handshakes by result", [
        (f"sum by (link, result) (rate(seedd_p2p_handshakes_total{{{I}}}[{RATE}]))",
         "{{link}} {{result}}"),
    ], unit="ops", desc="Noise XK handshakes per second (ok, timeout, error, self, conflict).", w=8))
    p.append(timeseries(lay, "Disconnects by reason", [
        (f"sum by (reason) (rate(seedd_p2p_disconnects_total{{{I}}}[{RATE}]))", "{{reason}}"),
    ], unit="ops", desc="Sessions ended per second, by reason.", w=8))

    p.append(lay.row("Messages"))
    for direction, word in (("in", "received"), ("out", "sent")):
        p.append(timeseries(lay, f"Messages {word} by type", [
            (f'sum by (type) (rate(seedd_p2p_messages_total{{{I}, direction="{direction}"}}[{RATE}]))',
             "{{type}}"),
        ], unit="ops", desc=f"Frames {word} per second by gossip type, or control/git.", stack=True))
    for direction, word in (("in", "received"), ("out", "sent")):
        p.append(timeseries(lay, f"Bytes {word} by type", [
            (f'sum by (type) (rate(seedd_p2p_message_bytes_total{{{I}, direction="{direction}"}}[{RATE}]))',
             "{{type}}"),
        ], unit="binBps", desc=f"Frame bytes {word} per second by type.", stack=True))
    p.append(timeseries(lay, "Relayed announcements by type", [
        (f"sum by (type) (rate(seedd_p2p_relayed_total{{{I}}}[{RATE}]))", "{{type}}"),
    ], unit="ops", desc="Announcements relayed to other peers (one per announcement and receiving "
                        "peer). Only with p2p.relay on."))
    p.append(timeseries(lay, "Dropped messages by reason", [
        (f"sum by (reason) (rate(seedd_p2p_dropped_messages_total{{{I}}}[{RATE}]))", "{{reason}}"),
    ], unit="ops", desc="Gossip not acted on (rate_limited, stale, unknown_author, own) or not "
                        "sent (outbox_full)."))

    p.append(lay.row("Abuse: rate limits, penalties, bans"))
    p.append(timeseries(lay, "Rate-limit hits by scope", [
        (f"sum by (scope) (rate(seedd_p2p_rate_limited_total{{{I}}}[{RATE}]))", "{{scope}}"),
    ], unit="ops", desc="Token-bucket hits: connection attempts per IP (ip), messages per node (nid).",
        w=8))
    p.append(timeseries(lay, "Connections rejected by reason", [
        (f"sum by (reason) (rate(seedd_p2p_connections_rejected_total{{{I}}}[{RATE}]))",
         "{{reason}}"),
    ], unit="ops", desc="Inbound connections refused before the handshake (banned, rate_limited, "
                        "inbound_limit).", w=8))
    p.append(timeseries(lay, "Penalties by reason", [
        (f"sum by (reason) (rate(seedd_p2p_penalties_total{{{I}}}[{RATE}]))", "{{reason}}"),
    ], unit="ops", desc="Misbehaviour penalties given to peer IPs (ban at p2p.ban.threshold).", w=8))
    p.append(timeseries(lay, "Bans", [
        (f"sum(increase(seedd_p2p_bans_total{{{I}}}[1h]))", "new bans in the last hour"),
        (f"sum(seedd_p2p_banned_ips{{{I}}})", "banned now"),
    ], desc="IPs banned after passing the penalty threshold (kept in RocksDB for "
            "p2p.ban.duration_secs).", w=8))

    p.append(lay.row("Gossip state"))
    p.append(timeseries(lay, "Routing table, address book, stored announcements", [
        (f"sum(seedd_p2p_routing_entries{{{I}}})", "routing entries"),
        (f"sum(seedd_p2p_address_book_nodes{{{I}}})", "address book nodes"),
        (f"sum(seedd_p2p_stored_announcements{{{I}}})", "stored announcements"),
    ], desc="Routing-table entries (repository, seeding node), seed nodes known, announcements "
            "kept for Subscribe answers.", w=8))
    p.append(timeseries(lay, "Inventory: announced vs unannounced", [
        (f'sum(seedd_p2p_inventory_repos{{{I}, state="announced"}})', "announced"),
        (f'sum(seedd_p2p_inventory_repos{{{I}, state="unannounced"}})', "beyond the cap"),
    ], desc=f"Public repositories announced; above {INVENTORY_CAP} the rest are not announced "
            "(red line).", line_at=INVENTORY_CAP, w=8))
    p.append(bargauge(lay, "Inventory vs cap", [
        (f'seedd_p2p_inventory_repos{{{I}, state="announced"}}', "{{instance}}"),
    ], desc=f"Announced inventory per seed against the {INVENTORY_CAP}-RID cap.",
        max_=INVENTORY_CAP, steps=[(None, "green"), (2700, "orange"), (INVENTORY_CAP, "red")],
        w=8, h=8))
    return dashboard("seedd-p2p", "seedd / P2P network",
                     "Radicle peer-to-peer: sessions, handshakes, gossip messages and bytes, "
                     "relay, rate limits, penalties and bans, routing state, inventory.",
                     p, tags=("p2p",))


def serving():
    lay = Layout()
    p = [lay.row("HTTP")]
    p.append(timeseries(lay, "Requests by route and status", [
        (f"sum by (route, status) (rate(seedd_http_requests_total{{{I}}}[{RATE}]))",
         "{{route}} {{status}}"),
    ], unit="reqps", desc="route ∈ info_refs, upload_pack, receive_pack, other."))
    p.append(timeseries(lay, "Response bytes by route", [
        (f"sum by (route) (rate(seedd_http_response_bytes_total{{{I}}}[{RATE}]))", "{{route}}"),
    ], unit="binBps", desc="Response body bytes sent per second.", stack=True))
    p.append(timeseries(lay, "Requests in flight by route", [
        (f"sum by (route) (seedd_http_requests_in_flight{{{I}}})", "{{route}}"),
    ], desc="Requests being answered, including streaming bodies.", w=8))
    p.append(stat(lay, "Error ratio (5xx, range)", [
        (f'sum(increase(seedd_http_requests_total{{{I}, status=~"5.."}}[$__range])) '
         f"/ sum(increase(seedd_http_requests_total{{{I}}}[$__range]))", "5xx"),
    ], unit="percentunit", desc="Share of 5xx answers over the dashboard's time range.",
        steps=[(None, "green"), (0.01, "orange"), (0.05, "red")], w=4, h=8, decimals=2))
    p.append(timeseries(lay, "Clones per second by protocol", [
        (f"sum by (protocol) (rate(seedd_git_clone_duration_seconds_count{{{I}}}[{RATE}]))",
         "{{protocol}}"),
    ], unit="ops", desc="Completed upload-pack (pack) responses per second, by git protocol.",
        w=12))

    p.append(lay.row("Clone duration"))
    p.append(timeseries(lay, "Clone duration quantiles", [
        (clone_quantile(0.5, "le, protocol"), "p50 {{protocol}}"),
        (clone_quantile(0.9, "le, protocol"), "p90 {{protocol}}"),
        (clone_quantile(0.99, "le, protocol"), "p99 {{protocol}}"),
        (f"sum by (protocol) (rate(seedd_git_clone_duration_seconds_sum{{{I}}}[{RATE}])) "
         f"/ sum by (protocol) (rate(seedd_git_clone_duration_seconds_count{{{I}}}[{RATE}]))",
         "mean {{protocol}}"),
    ], unit="s", desc="Request to last byte, from the seedd_git_clone_duration_seconds histogram "
                      "(buckets 5 ms … 300 s)."))
    p.append(heatmap(lay, "Clone duration distribution",
                     f"sum by (le) (increase(seedd_git_clone_duration_seconds_bucket{{{I}}}[{RATE}]))",
                     desc="Completed clones per duration bucket."))

    p.append(lay.row("Pack generation"))
    p.append(timeseries(lay, "Packs in flight and queue", [
        (f"sum(seedd_git_packs_in_flight{{{I}}})", "in flight"),
        (f"sum(seedd_git_pack_queue_depth{{{I}}})", "waiting for a slot"),
    ], desc="Pack generations running (cap http.max_concurrent_packs) and requests queued "
            "(cap http.pack_queue).", w=8))
    p.append(timeseries(lay, "Rejected (503) by reason", [
        (f"sum by (reason) (rate(seedd_git_pack_rejected_total{{{I}}}[{RATE}]))", "{{reason}}"),
    ], unit="ops", desc="queue_full, queue_timeout (packs); refs_queue_full, refs_queue_timeout "
                        "(ref advertisements). Answered 503 + Retry-After.", w=8))
    p.append(timeseries(lay, "Aborted responses by reason", [
        (f"sum by (reason) (rate(seedd_git_aborted_total{{{I}}}[{RATE}]))", "{{reason}}"),
    ], unit="ops", desc="client_gone, idle_timeout, request_timeout, body_too_large, read_error.",
        w=8))

    p.append(lay.row("Pack cache"))
    p.append(timeseries(lay, "Pack cache hits and misses", [
        (f"sum(rate(seedd_pack_cache_hits_total{{{I}}}[{RATE}]))", "hits"),
        (f"sum(rate(seedd_pack_cache_misses_total{{{I}}}[{RATE}]))", "misses"),
        (f"sum(rate(seedd_pack_cache_evictions_total{{{I}}}[{RATE}]))", "evictions"),
    ], unit="ops", desc="Cacheable upload-pack requests (no haves) answered from the pack cache "
                        "(no process spawned) or not; responses dropped for budget or age "
                        "(http.pack_cache).", w=8))
    p.append(timeseries(lay, "Pack cache bytes", [
        (f"sum(seedd_pack_cache_bytes{{{I}}})", "held on disk"),
        (f"sum(rate(seedd_pack_cache_served_bytes_total{{{I}}}[{RATE}]))", "served per second"),
    ], unit="bytes", desc="Complete cached responses on disk (budget http.pack_cache.max_bytes) "
                          "and bytes sent from them.", w=8))
    p.append(timeseries(lay, "Pack cache generation p50/p99", [
        (f"histogram_quantile(0.5, sum by (le) "
         f"(rate(seedd_pack_cache_generation_seconds_bucket{{{I}}}[{RATE}])))", "p50"),
        (f"histogram_quantile(0.99, sum by (le) "
         f"(rate(seedd_pack_cache_generation_seconds_bucket{{{I}}}[{RATE}])))", "p99"),
    ], unit="s", desc="Time git took to write a response into the cache.", w=8))

    p.append(lay.row("JSON API (explorer)"))
    p.append(timeseries(lay, "API requests by group and status", [
        (f"sum by (group, status) (rate(seedd_web_requests_total{{{I}}}[{RATE}]))",
         "{{group}} {{status}}"),
    ], unit="reqps", desc="radicle-httpd API and /raw requests; group ∈ node, repos, tree, blob, "
                          "history, commit, remotes, raw, other, cobs, archive.", w=8))
    p.append(timeseries(lay, "API p99 latency by group", [
        (f"histogram_quantile(0.99, sum by (le, group) "
         f"(rate(seedd_web_request_duration_seconds_bucket{{{I}}}[{RATE}])))", "p99 {{group}}"),
    ], unit="s", desc="Time until the response starts, from seedd_web_request_duration_seconds.",
        w=8))
    p.append(timeseries(lay, "API requests refused (busy)", [
        (f"sum by (reason) (rate(seedd_web_rejected_total{{{I}}}[{RATE}]))", "{{reason}}"),
    ], unit="ops", desc="Expensive API requests (trees, blobs, history, diffs, raw) answered 503 "
                        "because every slot stayed busy for 2 s.", w=8))

    p.append(lay.row("git over Radicle streams"))
    p.append(timeseries(lay, "Git streams served by result", [
        (f"sum by (result) (rate(seedd_p2p_git_serves_total{{{I}}}[{RATE}]))", "{{result}}"),
    ], unit="ops", desc="git streams served to Radicle peers (rad clone / fetch from this seed), "
                        "by result: ok, refused_unknown, refused_private, refused_busy, "
                        "bad_header, timeout, too_large, cancelled, error.", w=8))
    p.append(timeseries(lay, "Git streams in flight", [
        (f"sum(seedd_p2p_git_serves_in_flight{{{I}}})", "in flight"),
    ], desc="git streams being served now (cap p2p.max_concurrent_serves).", w=8))
    p.append(timeseries(lay, "Git bytes sent to peers", [
        (f"sum(rate(seedd_p2p_git_served_bytes_total{{{I}}}[{RATE}]))", "sent"),
    ], unit="binBps", desc="upload-pack output sent over Radicle streams.", w=8))
    return dashboard("seedd-serving", "seedd / Serving",
                     "git over HTTP(S): requests by route and status, bytes, in flight, clone "
                     "duration, pack slots, queue, rejections and aborts; the JSON API; git "
                     "served over Radicle streams.",
                     p, tags=("git",))


def storage():
    lay = Layout()
    p = [lay.row("Repositories and index")]
    p.append(timeseries(lay, "Repositories by visibility", [
        (f"sum by (visibility) (seedd_repos_indexed{{{I}}})", "{{visibility}}"),
    ], desc="Repositories in the index.", stack=True, w=8))
    p.append(timeseries(lay, "Index scan duration", [
        (f"histogram_quantile(0.5, sum by (le) (rate(seedd_index_scan_duration_seconds_bucket{{{I}}}[$__range])))",
         "p50 (range)"),
        (f"histogram_quantile(0.95, sum by (le) (rate(seedd_index_scan_duration_seconds_bucket{{{I}}}[$__range])))",
         "p95 (range)"),
        (f"sum(rate(seedd_index_scan_duration_seconds_sum{{{I}}}[1h])) "
         f"/ sum(rate(seedd_index_scan_duration_seconds_count{{{I}}}[1h]))", "mean (1h)"),
    ], unit="s", desc="Storage → index reconcile passes (startup, `seedctl rescan`).", w=8))
    p.append(timeseries(lay, "Index scans", [
        (f"sum(increase(seedd_index_scan_duration_seconds_count{{{I}}}[1h]))", "scans per hour"),
    ], desc="Reconcile passes per hour.", w=8))

    p.append(lay.row("Maintenance"))
    p.append(timeseries(lay, "Maintenance runs by result", [
        (f"sum by (result) (rate(seedd_maintenance_runs_total{{{I}}}[{RATE}]))", "{{result}}"),
        (f"sum(seedd_maintenance_running{{{I}}})", "running"),
    ], unit="ops", desc="Background repacks (multi-pack index, bitmaps), pack-refs and "
                        "commit-graph runs, by result; runs in progress ([maintenance]).", w=8))
    p.append(timeseries(lay, "Maintenance duration p50/p99", [
        (f"histogram_quantile(0.5, sum by (le) "
         f"(rate(seedd_maintenance_duration_seconds_bucket{{{I}}}[{RATE}])))", "p50"),
        (f"histogram_quantile(0.99, sum by (le) "
         f"(rate(seedd_maintenance_duration_seconds_bucket{{{I}}}[{RATE}])))", "p99"),
    ], unit="s", desc="Duration of maintenance runs.", w=8))
    p.append(timeseries(lay, "Maintenance debt and packs per repository", [
        (f"sum(seedd_maintenance_debt_score{{{I}}})", "debt score"),
        (f"histogram_quantile(0.99, sum by (le) "
         f"(rate(seedd_repo_packs_bucket{{{I}}}[1h])))", "p99 packs per repository"),
    ], desc="Sum of the repositories' debt scores (packs, loose objects and refs, missing "
            "bitmap or commit-graph, age) and the pack count seen at measurements.", w=8))

    p.append(lay.row("Disk"))
    p.append(timeseries(lay, "Data dir free and capacity", [
        (f"seedd_data_dir_free_bytes{{{I}}}", "{{instance}} free"),
        (f"seedd_data_dir_capacity_bytes{{{I}}}", "{{instance}} capacity"),
        (f"predict_linear(seedd_data_dir_free_bytes{{{I}}}[6h], 24 * 3600)",
         "{{instance}} free in 24 h (linear, 6 h trend)"),
    ], unit="bytes", desc="Filesystem holding data_dir. The forecast is what the "
                          "SeeddDiskFillingUp alert uses.", min0=False))
    p.append(timeseries(lay, "Data dir used", [
        (f"1 - seedd_data_dir_free_bytes{{{I}}} / seedd_data_dir_capacity_bytes{{{I}}}",
         "{{instance}}"),
    ], unit="percentunit", desc="Used fraction (SeeddDiskAlmostFull at 90 %, red line).",
        line_at=0.9, w=8))
    p.append(stat(lay, "Time until full (6 h trend)", [
        (f"seedd_data_dir_free_bytes{{{I}}} / (-deriv(seedd_data_dir_free_bytes{{{I}}}[6h]) > 0)",
         "{{instance}}"),
    ], unit="s", desc="Free bytes divided by the current fill rate; empty when the disk is not "
                      "filling.", steps=[(None, "red"), (86400, "orange"), (7 * 86400, "green")],
        w=4, h=8))

    p.append(lay.row("Process and TLS"))
    p.append(timeseries(lay, "Open file descriptors", [
        (f"seedd_process_open_fds{{{I}}}", "{{instance}} open"),
        (f"seedd_process_max_fds{{{I}}}", "{{instance}} limit"),
    ], desc="Open fds against the soft RLIMIT_NOFILE (SeeddFdsNearLimit at 80 %).", w=8))
    p.append(bargauge(lay, "File descriptors used", [
        (f"seedd_process_open_fds{{{I}}} / seedd_process_max_fds{{{I}}}", "{{instance}}"),
    ], unit="percentunit", max_=1, steps=[(None, "green"), (0.6, "orange"), (0.8, "red")],
        desc="open / limit", w=6, h=8))
    p.append(stat(lay, "TLS certificate expires in", [
        (f"(seedd_tls_cert_expiry_timestamp_seconds{{{I}}} > 0) - time()", "{{instance}}"),
    ], unit="s", desc="notAfter of the served certificate minus now; empty without TLS "
                      "(SeeddTLSCertExpiringSoon under 14 days).",
        steps=[(None, "red"), (3 * 86400, "orange"), (14 * 86400, "green")], w=5, h=8))
    p.append(timeseries(lay, "TLS reloads by result", [
        (f"sum by (result) (increase(seedd_tls_reloads_total{{{I}}}[1h]))", "{{result}}"),
    ], desc="Certificate reloads per hour (file change or SIGHUP); errors keep the old "
            "certificate.", w=5))
    return dashboard("seedd-storage", "seedd / Storage and process",
                     "Repositories and index scans, data_dir space with a 24 h forecast, file "
                     "descriptors, TLS certificate expiry.", p, tags=("storage",))


def fetch_quantile(q):
    return (f"histogram_quantile({q}, sum by (le) "
            f"(rate(seedd_fetch_duration_seconds_bucket{{{I}}}[{RATE}])))")


def replication():
    lay = Layout()
    p = [lay.row("Fetches from peers")]
    p.append(timeseries(lay, "Fetches by result", [
        (f"sum by (result) (rate(seedd_fetches_total{{{I}}}[{RATE}]))", "{{result}}"),
    ], unit="ops", desc="Fetches from Radicle peers per second, by result: ok, stream, git, "
                        "too_large, quota, timeout, deadline, invalid, io, purged, "
                        "internal; queue_full = request dropped.",
        stack=True, w=8))
    p.append(timeseries(lay, "Fetch failure ratio", [
        (f'sum(rate(seedd_fetches_total{{{I}, result!="ok"}}[{RATE}])) '
         f"/ sum(rate(seedd_fetches_total{{{I}}}[{RATE}]))", "not ok"),
    ], unit="percentunit", desc="Share of fetches that did not end ok (SeeddFetchFailureRatioHigh "
                                 "above 50 % over 15 minutes, red line).", line_at=0.5, w=8))
    p.append(stat(lay, "Time since last successful fetch", [
        (f"time() - seedd_fetch_last_success_timestamp_seconds{{{I}}}", "{{instance}} {{kind}}"),
    ], unit="s", desc="Now minus the end of the last successful fetch, by kind (clone: a new "
                      "repository, update: one already held). Empty until a fetch succeeded.",
        steps=[(None, "green"), (6 * 3600, "orange"), (24 * 3600, "red")], w=8, h=8,
        text_mode="value_and_name"))

    p.append(lay.row("Duration and volume"))
    p.append(timeseries(lay, "Fetch duration quantiles", [
        (fetch_quantile(0.5), "p50"),
        (fetch_quantile(0.9), "p90"),
        (fetch_quantile(0.99), "p99"),
        (f"sum(rate(seedd_fetch_duration_seconds_sum{{{I}}}[{RATE}])) "
         f"/ sum(rate(seedd_fetch_duration_seconds_count{{{I}}}[{RATE}]))", "mean"),
    ], unit="s", desc="Transfer, validation and apply, from the seedd_fetch_duration_seconds "
                      "histogram.", w=12))
    p.append(timeseries(lay, "Bytes received", [
        (f"sum(rate(seedd_fetch_received_bytes_total{{{I}}}[{RATE}]))", "received"),
    ], unit="binBps", desc="git bytes received from peers by fetches (per fetch cap: "
                           "p2p.max_fetch_bytes).", w=6))
    p.append(timeseries(lay, "Refs updated", [
        (f"sum(rate(seedd_fetch_refs_updated_total{{{I}}}[{RATE}]))", "refs"),
    ], unit="ops", desc="Refs written or deleted by applied fetches, per second.", w=6))

    p.append(lay.row("Queue and validation"))
    p.append(timeseries(lay, "Fetch queue vs active", [
        (f"sum(seedd_fetches_active{{{I}}})", "active"),
        (f"sum(seedd_fetch_queue_depth{{{I}}})", "waiting for a slot"),
    ], desc="Fetches running (cap p2p.max_concurrent_fetches) and waiting for a slot "
            "(SeeddFetchQueueSaturated: waiting without a break for 15 minutes).", w=12))
    p.append(timeseries(lay, "Validation failures by reason", [
        (f"sum by (reason) (increase(seedd_fetch_validation_failures_total{{{I}}}[{RATE}]))",
         "{{reason}}"),
    ], desc="Whole fetches rejected (missing_identity, identity, delegate_diverged, threshold) "
            "and namespaces pruned (invalid_sigrefs, unsigned_ref, mismatched_ref, missing_ref, "
            "diverged): peers serving forged or inconsistent data.", w=12))

    p.append(lay.row("Serving peers over Radicle"))
    p.append(timeseries(lay, "Git streams served by result", [
        (f"sum by (result) (rate(seedd_p2p_git_serves_total{{{I}}}[{RATE}]))", "{{result}}"),
    ], unit="ops", desc="git streams served to Radicle peers fetching from this seed, by result.",
        w=8))
    p.append(timeseries(lay, "Git streams in flight", [
        (f"sum(seedd_p2p_git_serves_in_flight{{{I}}})", "in flight"),
    ], desc="git streams being served now (cap p2p.max_concurrent_serves).", w=8))
    p.append(timeseries(lay, "Git bytes sent to peers", [
        (f"sum(rate(seedd_p2p_git_served_bytes_total{{{I}}}[{RATE}]))", "sent"),
    ], unit="binBps", desc="upload-pack output sent over Radicle streams.", w=8))
    return dashboard("seedd-replication", "seedd / Replication",
                     "Fetches from Radicle peers: rate and failures, duration, bytes, refs "
                     "updated, queue and slots, validation failures, time since the last "
                     "success; git served to peers over Radicle streams.",
                     p, tags=("replication",))


def quota_limit(usage, quota):
    """The limit behind a quota, recovered as usage / ratio (only while usage > 0)."""
    return (f"max by (tenant) ({usage}{{{I}, {T}}} / ignoring (quota) "
            f'(seedd_tenant_quota_usage_ratio{{{I}, {T}, quota="{quota}"}} > 0))')


def tenants():
    lay = Layout()
    p = [lay.row("Tenants")]
    p.append(stat(lay, "Active tenants", [
        (f'sum(seedd_tenants{{{I}, state="active"}})', "active"),
    ], desc="Tenants in state active on the chosen seeds (not filtered by $tenant).", w=4))
    p.append(stat(lay, "Suspended tenants", [
        (f'sum(seedd_tenants{{{I}, state="suspended"}})', "suspended"),
    ], desc="Tenants in state suspended (POST /api/v1/tenants/{name}/resume to resume). "
            "Not filtered by $tenant.",
        steps=[(None, "green"), (1, "orange")], w=4))
    p.append(stat(lay, "Quotas at or over the limit", [
        (f"count(seedd_tenant_quota_usage_ratio{{{I}, {T}}} >= 1) or vector(0)", "quotas"),
    ], desc="(tenant, quota) pairs with usage ≥ limit: further seeds, fetches or requests are "
            "refused (SeeddTenantOverQuota after 15 minutes).",
        steps=[(None, "green"), (1, "red")], w=4))
    p.append(stat(lay, "Quotas near the limit", [
        (f"count(seedd_tenant_quota_usage_ratio{{{I}, {T}}} >= 0.9 < 1) or vector(0)", "quotas"),
    ], desc="(tenant, quota) pairs at 90–100 % of the limit (SeeddTenantNearQuota after 1 hour).",
        steps=[(None, "green"), (1, "orange")], w=4))
    p.append(stat(lay, "Quota refusals (range)", [
        (f"sum(increase(seedd_tenant_quota_exceeded_total{{{I}, {T}}}[$__range])) or vector(0)",
         "refusals"),
    ], desc="Seeds, fetches and requests refused because of a tenant quota over the dashboard's "
            "time range.", steps=[(None, "green"), (1, "orange")], decimals=0, w=4))
    p.append(stat(lay, "Rate-limited requests (range)", [
        (f"sum(increase(seedd_tenant_rate_limited_total{{{I}, {T}}}[$__range])) or vector(0)",
         "429s"),
    ], desc="HTTP requests refused (429) by the tenants' own rate limits over the dashboard's "
            "time range.", steps=[(None, "green"), (1, "orange")], decimals=0, w=4))

    p.append(lay.row("Quotas"))
    p.append(bargauge(lay, "Quota usage", [
        (f"max by (tenant, quota) (seedd_tenant_quota_usage_ratio{{{I}, {T}}})",
         "{{tenant}} {{quota}}"),
    ], unit="percentunit", desc="Usage over limit per tenant and quota (repos, bytes, egress "
                                "per day); unlimited quotas have no series. Highest across the "
                                "chosen seeds.", max_=1, steps=QUOTA_STEPS, w=8, h=8))
    p.append(timeseries(lay, "Quota usage by quota", [
        (f"max by (tenant, quota) (seedd_tenant_quota_usage_ratio{{{I}, {T}}})",
         "{{tenant}} {{quota}}"),
    ], unit="percentunit", desc="seedd_tenant_quota_usage_ratio: 1 (red line) = the limit is "
                                "reached and further seeds / fetches / requests are refused. "
                                "The egress quota is per day and starts again at 0.",
        line_at=1, w=16))
    p.append(timeseries(lay, "Repositories vs quota", [
        (f"max by (tenant) (seedd_tenant_repos{{{I}, {T}}})", "{{tenant}}"),
        (quota_limit("seedd_tenant_repos", "repos"), "{{tenant}} quota"),
    ], desc="Repositories seeded by each tenant, and its repos quota (derived as repositories / "
            "usage ratio, so shown only while the tenant has repositories and a limit).", w=12))
    p.append(timeseries(lay, "Stored bytes vs quota", [
        (f"max by (tenant) (seedd_tenant_stored_bytes{{{I}, {T}}})", "{{tenant}}"),
        (quota_limit("seedd_tenant_stored_bytes", "bytes"), "{{tenant}} quota"),
    ], unit="bytes", desc="Bytes on disk of each tenant's repositories (a repository shared "
                          "by tenants counts in full for each), and its bytes quota (derived, "
                          "as for repositories).", w=12))
    p.append(timeseries(lay, "Quota-exceeded events", [
        (f"sum by (tenant, quota) (increase(seedd_tenant_quota_exceeded_total{{{I}, {T}}}[1h]))",
         "{{tenant}} {{quota}}"),
    ], desc="Seeds, fetches and requests refused per hour because of a tenant quota, by "
            "quota (repos, bytes, egress per day).", w=12))
    p.append(timeseries(lay, "Tenants by state", [
        (f"sum by (state) (seedd_tenants{{{I}}})", "{{state}}"),
    ], desc="Tenants per state (active, suspended) on the chosen seeds; not filtered by $tenant.",
        stack=True, w=12))

    p.append(lay.row("Traffic"))
    p.append(timeseries(lay, "Egress by transport", [
        (f"sum by (tenant, transport) (rate(seedd_tenant_egress_bytes_total{{{I}, {T}}}[{RATE}]))",
         "{{tenant}} {{transport}}"),
    ], unit="binBps", desc="Bytes served for each tenant per second, by transport: http "
                           "(git smart-HTTP) and radicle (Radicle peers).", stack=True))
    p.append(timeseries(lay, "HTTP requests by code", [
        (f"sum by (tenant, code) (rate(seedd_tenant_http_requests_total{{{I}, {T}}}[{RATE}]))",
         "{{tenant}} {{code}}"),
    ], unit="reqps", desc="Requests on each tenant's hostnames per second, by status class "
                          "(2xx, 3xx, 4xx, 5xx).", stack=True))
    p.append(timeseries(lay, "Rate-limited requests by tenant", [
        (f"sum by (tenant) (rate(seedd_tenant_rate_limited_total{{{I}, {T}}}[{RATE}]))",
         "{{tenant}}"),
    ], unit="reqps", desc="HTTP requests refused (429) by each tenant's rate limit "
                          "(rate.requests_per_second / rate.burst)."))
    p.append(timeseries(lay, "HTTP rate limiting by scope", [
        (f"sum by (scope) (rate(seedd_http_rate_limited_total{{{I}}}[{RATE}]))", "{{scope}}"),
    ], unit="reqps", desc="All HTTP refusals by rate limits and admission, not filtered by "
                          "$tenant: ip and tenant (429), repo (per-repository pack queue, 503)."))

    p.append(lay.row("Seed identities"))
    p.append(timeseries(lay, "Identity inventory vs cap", [
        (f"seedd_identity_inventory_repos{{{I}}}", "{{identity}} ({{instance}})"),
        (f"seedd_identity_inventory_cap_repos{{{I}}}", "{{identity}} cap ({{instance}})"),
    ], desc="Repositories each seed identity announces, against the most it may announce "
            "(seeding beyond the cap is refused). SeeddIdentityInventoryNearCap at 85 %. "
            "Not filtered by $tenant.", w=16))
    p.append(bargauge(lay, "Identity inventory used", [
        (f"seedd_identity_inventory_repos{{{I}}} / (seedd_identity_inventory_cap_repos{{{I}}} > 0)",
         "{{identity}} ({{instance}})"),
    ], unit="percentunit", desc="Inventory over cap per seed identity.", max_=1,
        steps=[(None, "green"), (0.85, "orange"), (1, "red")], w=8, h=8))
    return dashboard("seedd-tenants", "seedd / Tenants",
                     "Per-tenant repositories, stored bytes and quotas, quota refusals, egress "
                     "by transport, HTTP requests by code and rate limiting; tenants by state; "
                     "seed identity inventory against its cap.",
                     p, tags=("tenants",), tenant=True)


def fleet():
    lay = Layout()
    p = [lay.row("Routing (seedd front)")]
    p.append(timeseries(lay, "Requests by route and result", [
        (f"sum by (route, result) (rate(seedd_front_requests_total{{{I}}}[{RATE}]))",
         "{{route}} {{result}}"),
    ], unit="reqps", desc="Requests the fronts routed: git, api and raw to a repository's shard, "
                          "node_wide merged over the shards, node to the node shard; by result.",
        stack=True, w=12))
    p.append(timeseries(lay, "Requests by shard", [
        (f"sum by (shard) (rate(seedd_front_requests_total{{{I}}}[{RATE}]))", "{{shard}}"),
    ], unit="reqps", desc="Requests per shard (fleet = merged node-wide answers): a shard far "
                          "above the others holds the hot repositories (move some: seedctl "
                          "fleet move).", stack=True, w=12))
    p.append(timeseries(lay, "Failovers by reason", [
        (f"sum by (shard, reason) (rate(seedd_front_failovers_total{{{I}}}[{RATE}]))",
         "{{shard}} {{reason}}"),
    ], unit="reqps", desc="Requests answered by a replica other than the repository's first "
                          "choice: down (not ready), connect (refused the connection), "
                          "lacked_objects (answered a fetch with nothing: it was behind).", w=12))
    p.append(timeseries(lay, "Response head time quantiles", [
        (f"histogram_quantile(0.5, sum by (le, route) (rate(seedd_front_response_seconds_bucket{{{I}}}[{RATE}])))",
         "p50 {{route}}"),
        (f"histogram_quantile(0.99, sum by (le, route) (rate(seedd_front_response_seconds_bucket{{{I}}}[{RATE}])))",
         "p99 {{route}}"),
    ], unit="s", desc="Time from the request to the response head, through the front.", w=12))

    p.append(lay.row("Replicas"))
    p.append(timeseries(lay, "Replicas taking reads", [
        (f"max by (shard, replica) (seedd_front_replica_up{{{I}}})", "{{shard}} {{replica}}"),
    ], desc="1 while the replica's /readyz answers 200 (each front checks every replica; the "
            "highest over the fronts is shown).", w=8))
    p.append(timeseries(lay, "Replica lag", [
        (f"max by (instance) (seedd_fleet_lag_seconds{{{I}}})", "{{instance}}"),
    ], unit="s", desc="How long each replica has been behind another replica of its shard (a "
                      "lower bound: 0 until a difference is seen at two comparisons, "
                      "fleet.compare_interval_secs apart).", w=8))
    p.append(timeseries(lay, "Repositories behind a sibling", [
        (f"sum by (instance) (seedd_fleet_repos_behind{{{I}}})", "{{instance}}"),
    ], desc="Repositories placed on the replica's shard whose refs differed from another "
            "replica's at the last comparison; each is fetched from that replica.", w=8))
    p.append(stat(lay, "Placement versions in force", [
        (f"count(count by (version) (seedd_front_placement_info{{{I}}} == 1))", "versions"),
    ], desc="Distinct placement versions the fronts act on: more than 1 for longer than a "
            "ConfigMap update takes means a front did not pick up the placement.",
        steps=[(None, "green"), (2, "orange")], w=8, h=4))
    return dashboard("seedd-fleet", "seedd / Fleet",
                     "A fleet behind seedd front: requests by route, result and shard, "
                     "failovers, response times, replicas taking reads, replica lag and "
                     "repositories behind, placement versions.",
                     p, tags=("fleet",))


DASHBOARDS = {
    "seedd-fleet.json": fleet,
    "seedd-overview.json": overview,
    "seedd-p2p.json": p2p,
    "seedd-replication.json": replication,
    "seedd-serving.json": serving,
    "seedd-storage.json": storage,
    "seedd-tenants.json": tenants,
}


def render(build):
    return json.dumps(build(), indent=2, ensure_ascii=False) + "\n"


def main(argv):
    check = "--check" in argv
    bad = []
    for name, build in DASHBOARDS.items():
        path = OUT / name
        text = render(build)
        if check:
            if not path.exists() or path.read_text() != text:
                bad.append(name)
        else:
            OUT.mkdir(exist_ok=True)
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)}")
    if bad:
        print("grafana/ is out of date with ops/tools/gen_dashboards.py: " + ", ".join(bad)
              + " (run python3 ops/tools/gen_dashboards.py)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
