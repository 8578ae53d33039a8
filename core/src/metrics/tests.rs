use super::*;

use crate::serve::Admission;
use labels::same_labels;

/// Families whose label values are only known at runtime (tenant and identity names) or that
/// have no value before their first event; every other one has series in a new registry.
fn runtime_only(name: &str) -> bool {
    name.starts_with("seedd_tenant_")
        || name.starts_with("seedd_identity_")
        || name == "seedd_fetch_last_success_timestamp_seconds"
}

#[test]
fn a_new_registry_exports_every_known_series_at_0() {
    let m = Metrics::new().unwrap();
    let families = m.registry.gather();
    for d in CATALOGUE {
        let series = families
            .iter()
            .find(|f| f.name() == d.name)
            .map_or(0, |f| f.get_metric().len());
        if runtime_only(d.name) {
            assert_eq!(
                series, 0,
                "{} has series before any tenant or event",
                d.name
            );
        } else {
            assert!(series > 0, "{} has no series in a new registry", d.name);
        }
    }
    let text = String::from_utf8(m.render()).unwrap();
    for line in text.lines() {
        if !line.starts_with('#') && !line.starts_with("seedd_build_info{") {
            assert!(line.ends_with(" 0"), "not 0 in a new registry: {line}");
        }
    }
    let count = |name: &str| {
        families
            .iter()
            .find(|f| f.name() == name)
            .map_or(0, |f| f.get_metric().len())
    };
    assert_eq!(count("seedd_http_requests_total"), 4 * HTTP_STATUSES.len());
    assert_eq!(
        count("seedd_p2p_handshakes_total"),
        2 * HANDSHAKE_RESULTS.len()
    );
    assert_eq!(count("seedd_p2p_messages_total"), 2 + 2 * 7);
    assert_eq!(count("seedd_p2p_disconnects_total"), DISCONNECTS.len() + 4);
    assert_eq!(count("seedd_fetches_total"), 2 + labels::FETCH_ERRORS.len());
    assert!(text.contains("seedd_git_pack_rejected_total{reason=\"queue_timeout\"} 0"));
    assert!(text.contains("seedd_p2p_penalties_total{reason=\"handshake\"} 0"));
    assert!(text.contains("seedd_p2p_dropped_messages_total{reason=\"unknown_author\"} 0"));
    assert!(text.contains("seedd_http_requests_total{route=\"other\",status=\"404\"} 0"));
    assert!(text.contains("seedd_git_clone_duration_seconds_count{protocol=\"v0\"} 0"));

    // A tenant's counters start at 0 when it is known, and go with it.
    m.tenant.init_tenant("acme");
    let text = String::from_utf8(m.render()).unwrap();
    for series in [
        "seedd_tenant_egress_bytes_total{tenant=\"acme\",transport=\"radicle\"} 0",
        "seedd_tenant_http_requests_total{code=\"5xx\",tenant=\"acme\"} 0",
        "seedd_tenant_quota_exceeded_total{quota=\"egress\",tenant=\"acme\"} 0",
        "seedd_tenant_rate_limited_total{tenant=\"acme\"} 0",
    ] {
        assert!(text.contains(series), "{series} missing:\n{text}");
    }
    m.tenant.forget("acme");
    let text = String::from_utf8(m.render()).unwrap();
    assert!(!text.contains("acme"), "{text}");
}

/// The labels of `samples` (one value of every variant) are exactly `listed`, without repeats.
/// The enum lists that known label values come from name every variant (this crate's enums;
/// seedd-http and seedd-p2p check theirs against the same lists). Each `match` below
/// has no wildcard: a new variant does not compile until it is added to the samples next to
/// it, and then the test fails until it is in the enum's `ALL`/`LABELS` too.
#[test]
fn label_lists_name_every_variant() {
    let samples = [Admission::QueueFull, Admission::QueueTimeout];
    for a in samples {
        match a {
            Admission::QueueFull | Admission::QueueTimeout => {}
        }
    }
    same_labels(
        &samples.map(Admission::reason),
        &Admission::ALL.map(Admission::reason),
    );
    same_labels(&Admission::ALL.map(Admission::reason), labels::ADMISSIONS);

    let samples = [Dropped::Stale, Dropped::UnknownAuthor, Dropped::Own];
    for d in samples {
        match d {
            Dropped::Stale | Dropped::UnknownAuthor | Dropped::Own => {}
        }
    }
    same_labels(
        &samples.map(|d| d.label()),
        &Dropped::ALL.map(|d| d.label()),
    );

    let samples = [
        DisconnectReason::InvalidSignature,
        DisconnectReason::InvalidTimestamp {
            timestamp: 0,
            now: 0,
        },
        DisconnectReason::Stale,
        DisconnectReason::Command,
    ];
    for r in &samples {
        match r {
            DisconnectReason::InvalidSignature
            | DisconnectReason::InvalidTimestamp { .. }
            | DisconnectReason::Stale
            | DisconnectReason::Command => {}
        }
    }
    same_labels(
        &samples.each_ref().map(|r| r.label()),
        DisconnectReason::LABELS,
    );

    // Every message type that decodes is in `MessageType::ALL`.
    let decodable: Vec<MessageType> = (0..=u16::MAX)
        .filter_map(|id| MessageType::try_from(id).ok())
        .collect();
    same_labels(
        &decodable.iter().map(|t| type_label(*t)).collect::<Vec<_>>(),
        &MessageType::ALL.map(type_label),
    );
    for l in [Link::Inbound, Link::Outbound] {
        match l {
            Link::Inbound | Link::Outbound => {}
        }
    }
}

#[test]
fn every_registered_metric_is_in_the_catalogue_and_vice_versa() {
    let m = Metrics::new().unwrap();
    // Touch labelled metrics so they appear in the exposition.
    m.count_request("upload_pack", 200);
    m.http_response_bytes
        .with_label_values(&["upload_pack"])
        .inc();
    m.http_in_flight.with_label_values(&["upload_pack"]).set(0);
    m.clone_duration.with_label_values(&["v2"]).observe(0.1);
    m.pack_rejected.with_label_values(&["queue_full"]).inc();
    m.git_aborted.with_label_values(&["client_gone"]).inc();
    m.repos_indexed.with_label_values(&["public"]).set(1);
    m.tls_reloads.with_label_values(&["ok"]).inc();
    let p = &m.p2p;
    p.handshakes.with_label_values(&["inbound", "ok"]).inc();
    p.messages.with_label_values(&["in", "ping"]).inc();
    p.message_bytes.with_label_values(&["in", "ping"]).inc();
    p.dropped.with_label_values(&["stale"]).inc();
    p.rate_limited.with_label_values(&["ip"]).inc();
    p.rejected.with_label_values(&["banned"]).inc();
    p.disconnects.with_label_values(&["stale"]).inc();
    p.penalties.with_label_values(&["decode_error"]).inc();
    p.relayed.with_label_values(&["node"]).inc();
    p.git_serves.with_label_values(&["ok"]).inc();
    p.fetches.with_label_values(&["ok"]).inc();
    p.validation_failures
        .with_label_values(&["threshold"])
        .inc();
    p.fetch_duration.observe(0.1);
    p.fetch_last_success.with_label_values(&["clone"]).set(1);
    let t = &m.tenant;
    t.repos.with_label_values(&["acme"]).set(1);
    t.stored_bytes.with_label_values(&["acme"]).set(1);
    t.egress_bytes.with_label_values(&["acme", "http"]).inc();
    t.http_requests.with_label_values(&["acme", "2xx"]).inc();
    t.quota_usage.with_label_values(&["acme", "repos"]).set(0.5);
    t.quota_exceeded.with_label_values(&["acme", "repos"]).inc();
    t.rate_limited.with_label_values(&["acme"]).inc();
    t.identity_inventory.with_label_values(&["default"]).set(1);
    t.identity_cap.with_label_values(&["default"]).set(2973);
    t.identity_unannounced
        .with_label_values(&["default"])
        .set(0);
    m.http_rate_limited.with_label_values(&["ip"]).inc();
    m.config_reloads.with_label_values(&["ok"]).inc();
    let names: Vec<String> = m
        .registry
        .gather()
        .iter()
        .map(|f| f.name().to_owned())
        .collect();
    for d in CATALOGUE {
        assert!(
            names.contains(&d.name.to_owned()),
            "{} not registered",
            d.name
        );
        assert!(d.name.starts_with("seedd_"));
    }
    for n in &names {
        assert!(
            CATALOGUE.iter().any(|d| d.name == n),
            "{n} not in catalogue"
        );
    }
    let readme = include_str!("../../../README.md");
    for d in CATALOGUE {
        assert!(
            readme.contains(&format!("`{}`", d.name)),
            "{} missing from README's metrics table",
            d.name
        );
    }
    m.sample_system(std::path::Path::new("/"));
    assert!(m.open_fds.get() > 0);
    assert!(m.max_fds.get() >= m.open_fds.get());
    assert!(m.data_dir_capacity.get() >= m.data_dir_free.get());
    assert!(m.data_dir_capacity.get() > 0);
    let text = String::from_utf8(m.render()).unwrap();
    assert!(text.contains("seedd_build_info{version="));
}
