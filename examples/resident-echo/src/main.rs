//! A resident handler: answers each request with its body upper-cased, numbered by how many
//! requests this VM has answered — the count lives on from request to request because the VM
//! does. `warpvisor serve guests/wasm/resident-echo.wasm`, then
//! `curl --data-binary hello http://127.0.0.1:8080/run` → `1: HELLO`.
use warpvisor_guest::{serve, Response};

fn main() {
    let mut answered: u64 = 0;
    serve(|body| {
        if body.is_empty() {
            return Response::with_status(400, "send a body\n");
        }
        answered += 1;
        let mut reply = format!("{answered}: ").into_bytes();
        reply.extend(body.to_ascii_uppercase());
        Response::ok(reply)
    });
}
