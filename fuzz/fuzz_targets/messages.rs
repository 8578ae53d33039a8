//! `Message::decode` on arbitrary bytes. A decoded message must re-encode and decode back to
//! an equal message (see `check_message_round_trip` for the two refusals the protocol allows);
//! `Announcement::verify` must not panic.

#![no_main]

use libfuzzer_sys::fuzz_target;
use seedd_fuzz::check_message_round_trip;
use seedd_proto::wire::Message;

fuzz_target!(|data: &[u8]| {
    let Ok((message, used)) = Message::decode_prefix(data) else {
        return;
    };
    assert!(used <= data.len(), "consumed more than the input");
    assert_eq!(Message::decode(data).as_ref(), Ok(&message));
    if let Message::Announcement(ann) = &message {
        let _ = ann.verify();
    }
    check_message_round_trip(&message, used);
});
