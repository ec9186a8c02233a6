//! Whatever a peer (or a stranger on a quorum port) sends on a link: the
//! hello, then a stream of length-prefixed frames, as the link's reader
//! cuts them; ZAB frames re-encode to what decoded, and pipeline frames go
//! through the pipeline's own decoder.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wazoo::core::server::PeerMsg;
use wazoo::quorum::{self, Frame, Hello, HELLO_LEN};

fuzz_target!(|data: &[u8]| {
    let Some((hello, mut rest)) = data.split_first_chunk::<HELLO_LEN>() else {
        return;
    };
    if let Ok(h) = Hello::decode(hello) {
        assert_eq!(Hello::decode(&h.encode()), Ok(h));
    }
    while let Some((len, tail)) = rest.split_first_chunk::<4>() {
        let len = u32::from_be_bytes(*len) as usize;
        if quorum::check_frame_len(len).is_err() {
            return;
        }
        let frame = &tail[..len.min(tail.len())];
        rest = &tail[frame.len()..];
        match quorum::decode_frame(frame) {
            Ok(Frame::Zab(msg)) => {
                let again = wazoo::core::zab::Message::decode(&msg.to_bytes())
                    .expect("a re-encoded message decodes");
                assert_eq!(again, msg);
            }
            Ok(Frame::App(payload)) => {
                let _ = PeerMsg::decode(&payload);
            }
            Ok(Frame::Keepalive) | Err(_) => {}
        }
    }
});
