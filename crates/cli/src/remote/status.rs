//! A refused call as a sentence that says what to do.

use tonic::Code;

use super::connect::Address;

/// The deepest cause of `e`, as it says itself (a connection refused, a
/// missing socket, a certificate not trusted).
pub fn innermost(e: &(dyn std::error::Error + 'static)) -> String {
    let mut last = e;
    while let Some(next) = last.source() {
        last = next;
    }
    last.to_string()
}

/// `status`, from the scheduler at `address`, said for people.
pub fn explain(status: &tonic::Status, address: &Address) -> anyhow::Error {
    let msg = status.message();
    // A connection that failed under the call (tonic's "transport error",
    // as when a port-forward ends): its cause, as for one that never
    // connected.
    let transport = status.code() == Code::Unknown && msg == "transport error";
    let text = match status.code() {
        _ if transport => format!(
            "cannot reach the scheduler at {address}: {} (is `trainyard serve` running? pass --server or set TRAINYARD_SERVER)",
            status
                .source()
                .map(innermost)
                .unwrap_or_else(|| msg.to_string())
        ),
        Code::Unavailable => {
            let why = if msg.is_empty() {
                status
                    .source()
                    .map(innermost)
                    .unwrap_or_else(|| "unavailable".into())
            } else {
                msg.to_string()
            };
            format!(
                "cannot reach the scheduler at {address}: {why} (is `trainyard serve` running? pass --server or set TRAINYARD_SERVER)"
            )
        }
        Code::Unauthenticated => format!(
            "not authenticated: {msg} (the scheduler at {address} wants a Kubernetes token: pass --token, set TRAINYARD_TOKEN, or use a kubeconfig user with a token)"
        ),
        Code::PermissionDenied => format!("not authorized: {msg}"),
        // The server's message names the job and the closest names.
        Code::NotFound | Code::InvalidArgument => msg.to_string(),
        Code::DeadlineExceeded => {
            format!("the scheduler at {address} did not answer in time: {msg}")
        }
        Code::Unimplemented => format!(
            "the scheduler at {address} does not have this call ({msg}); is it an older trainyard?"
        ),
        _ => format!(
            "the scheduler at {address} answered {}: {msg}",
            code_name(status.code())
        ),
    };
    anyhow::anyhow!(text)
}

use std::error::Error as _;

/// The code's gRPC name, as grpcurl prints it.
fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_say_what_to_do() {
        let at = Address::Unix("/tmp/x.sock".into());
        let say = |s: tonic::Status| explain(&s, &at).to_string();
        assert_eq!(
            say(tonic::Status::unauthenticated("no token")),
            "not authenticated: no token (the scheduler at unix:///tmp/x.sock wants a Kubernetes token: pass --token, set TRAINYARD_TOKEN, or use a kubeconfig user with a token)"
        );
        assert_eq!(
            say(tonic::Status::permission_denied(
                "user u may not get pods in ml"
            )),
            "not authorized: user u may not get pods in ml"
        );
        assert_eq!(
            say(tonic::Status::not_found("no job ml/x; did you mean ml/xy?")),
            "no job ml/x; did you mean ml/xy?"
        );
        assert_eq!(
            say(tonic::Status::unavailable("no cycle yet")),
            "cannot reach the scheduler at unix:///tmp/x.sock: no cycle yet (is `trainyard serve` running? pass --server or set TRAINYARD_SERVER)"
        );
        assert_eq!(
            say(tonic::Status::internal("boom")),
            "the scheduler at unix:///tmp/x.sock answered INTERNAL: boom"
        );
        // A connection that ended under the call: its cause.
        let mut ended = tonic::Status::unknown("transport error");
        ended.set_source(std::sync::Arc::new(std::io::Error::other(
            "stream closed because of a broken pipe",
        )));
        assert_eq!(
            say(ended),
            "cannot reach the scheduler at unix:///tmp/x.sock: stream closed because of a broken pipe (is `trainyard serve` running? pass --server or set TRAINYARD_SERVER)"
        );
        assert_eq!(
            say(tonic::Status::unknown("odd")),
            "the scheduler at unix:///tmp/x.sock answered UNKNOWN: odd"
        );
    }
}
