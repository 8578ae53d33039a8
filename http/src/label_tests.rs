//! This crate's enums whose cases are metric label values name every variant, and the lists in
//! `seedd_core::metrics::labels` name every case (each `match` has no wildcard: a new variant
//! does not compile until it is added to the samples).

use seedd_core::metrics::labels::{self, same_labels};

use crate::git::Endpoint;
use crate::web::Group;

#[test]
fn label_lists_name_every_variant() {
    let samples = [
        Endpoint::InfoRefs,
        Endpoint::UploadPack,
        Endpoint::ReceivePack,
    ];
    for e in samples {
        match e {
            Endpoint::InfoRefs | Endpoint::UploadPack | Endpoint::ReceivePack => {}
        }
    }
    same_labels(
        &samples.map(Endpoint::route),
        &Endpoint::ALL.map(Endpoint::route),
    );
    same_labels(&Endpoint::ALL.map(Endpoint::route), labels::HTTP_ROUTES);
    same_labels(
        &[Endpoint::InfoRefs.route(), Endpoint::UploadPack.route()],
        labels::STREAMED_ROUTES,
    );
    assert!(!Endpoint::ALL
        .map(Endpoint::route)
        .contains(&Endpoint::OTHER_ROUTE));

    same_labels(&Group::ALL.map(Group::label), labels::WEB_GROUPS);
}
