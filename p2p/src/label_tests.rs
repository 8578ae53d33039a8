//! This crate's enums whose cases are metric label values name every variant, and the lists in
//! `seedd_core::metrics::labels` name every case (each `match` has no wildcard: a new variant
//! does not compile until it is added to the samples).

use seedd_core::metrics::labels::{self, same_labels};

use crate::fetch::{FetchError, ValidationError};
use crate::net::guard::Offence;

#[test]
#[allow(clippy::unwrap_used)]
fn label_lists_name_every_variant() {
    let samples = [
        Offence::DecodeError,
        Offence::InvalidSignature,
        Offence::InvalidTimestamp,
        Offence::Handshake,
    ];
    for o in samples {
        match o {
            Offence::DecodeError
            | Offence::InvalidSignature
            | Offence::InvalidTimestamp
            | Offence::Handshake => {}
        }
    }
    same_labels(
        &samples.map(Offence::label),
        &Offence::ALL.map(Offence::label),
    );
    same_labels(&Offence::ALL.map(Offence::label), labels::OFFENCES);
    let nid = seedd_proto::crypto::Keypair::mock(1).nid();
    let samples = [
        ValidationError::MissingIdentity,
        ValidationError::IdentityHistory(seedd_core::storage::cob::CobError::NoHeads),
        ValidationError::IdentityDocument(seedd_core::storage::IdentityError::Missing),
        ValidationError::DelegateDiverged(nid),
        ValidationError::Refused(String::new()),
        ValidationError::Threshold {
            valid: 0,
            threshold: 1,
        },
    ];
    for v in &samples {
        match v {
            ValidationError::MissingIdentity
            | ValidationError::IdentityHistory(_)
            | ValidationError::IdentityDocument(_)
            | ValidationError::DelegateDiverged(_)
            | ValidationError::Refused(_)
            | ValidationError::Threshold { .. } => {}
        }
    }
    same_labels(
        &samples.each_ref().map(|v| v.label()),
        labels::VALIDATION_FAILURES,
    );

    let cancelled = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(async {
            let task = tokio::spawn(std::future::pending::<()>());
            task.abort();
            task.await.unwrap_err()
        });
    let samples = [
        FetchError::Stream(nid, crate::net::OpenError::NotConnected(nid)),
        FetchError::SessionClosed,
        FetchError::Git(String::new()),
        FetchError::Spawn(std::io::Error::other("x")),
        FetchError::Protocol(crate::fetch::ProtocolError::Closed),
        FetchError::repository(std::io::Error::other("x")),
        FetchError::TooLarge(0),
        FetchError::Quota(0),
        FetchError::Timeout(std::time::Duration::ZERO),
        FetchError::Deadline(std::time::Duration::ZERO),
        FetchError::Invalid(ValidationError::MissingIdentity),
        FetchError::Purged,
        FetchError::Io(std::io::Error::other("x")),
        FetchError::Journal(seedd_core::index::IndexError::MissingCf("meta")),
        FetchError::Task(cancelled),
        FetchError::NoResult,
        FetchError::Step(String::new()),
    ];
    for e in &samples {
        match e {
            FetchError::Stream(..)
            | FetchError::SessionClosed
            | FetchError::Git(_)
            | FetchError::Spawn(_)
            | FetchError::Protocol(_)
            | FetchError::Repository(_)
            | FetchError::TooLarge(_)
            | FetchError::Quota(_)
            | FetchError::Timeout(_)
            | FetchError::Deadline(_)
            | FetchError::Invalid(_)
            | FetchError::Purged
            | FetchError::Io(_)
            | FetchError::Journal(_)
            | FetchError::Task(_)
            | FetchError::NoResult
            | FetchError::Step(_) => {}
        }
    }
    same_labels(&samples.each_ref().map(|e| e.label()), labels::FETCH_ERRORS);
}
