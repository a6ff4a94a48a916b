//! Any byte string as a request frame (without its 4-byte length): decoding must return
//! an error or a request, never panic; and whatever decodes must encode again and decode
//! to the same request, so the broker never holds a request it could not write back.

#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use strata_protocol::decode_request;
use strata_protocol::header::encode_request;

fuzz_target!(|data: &[u8]| {
    let Ok(request) = decode_request(Bytes::copy_from_slice(data)) else {
        return;
    };
    let frame = encode_request(&request.header, &request.body);
    let length = i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]);
    assert_eq!(length as usize, frame.len() - 4, "length prefix");
    let again = decode_request(frame.slice(4..)).expect("a re-encoded request decodes");
    assert_eq!(again, request, "decode(encode(decode(x))) == decode(x)");
});
