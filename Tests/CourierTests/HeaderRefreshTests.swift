@testable @_spi(CourierTesting) import CourierKit
import Foundation
import Testing

/// The platform-neutral half of refreshing a handed-off upload's headers as it begins (the iOS
/// delegate, `urlSession(_:task:willBeginDelayedRequest:completionHandler:)`, only calls it).
@Suite struct HeaderRefreshTests {
    let upload = DelayedUpload(
        messageID: MessageID(), url: URL(string: "https://example.com/inbox")!,
        headers: ["Authorization": "Bearer old", "Idempotency-Key": "k", "Content-Type": "application/json"])

    @Test func freshHeadersReplaceOldOnesOfAnyCaseButNeverCouriersOwn() {
        let merged = HeaderRefresh.merged(
            upload.headers,
            with: ["authorization": "Bearer new", "X-Account": "7", "idempotency-key": "forged",
                   "CONTENT-TYPE": "text/plain"])
        #expect(merged == [
            "authorization": "Bearer new", "X-Account": "7", "Idempotency-Key": "k", "Content-Type": "application/json",
        ])
    }

    @Test func aRefreshWithinTheLimitIsUsed() async {
        let fresh = await HeaderRefresh.run({ _ in ["Authorization": "Bearer new"] }, for: upload) { _ in
            try await Task.sleep(for: .seconds(3600))  // the limit never comes first
        }
        #expect(fresh == ["Authorization": "Bearer new"])
    }

    @Test func aRefreshThatTakesTooLongLeavesTheRequestAsItIs() async {
        let refresh: DelayedUploadRefresh = { _ in
            try? await Task.sleep(for: .seconds(3600))  // cancelled when the limit comes
            return ["Authorization": "Bearer late"]
        }
        let fresh = await HeaderRefresh.run(refresh, for: upload) { _ in }  // the limit, at once
        #expect(fresh == nil)
    }

    /// A refresh that ignores cancellation (an auth library's callback) still cannot hold the
    /// upload past the limit.
    @Test func aRefreshThatIgnoresCancellationStillEndsAtTheLimit() async {
        let (gate, open) = AsyncStream.makeStream(of: Void.self)
        let refresh: DelayedUploadRefresh = { _ in
            // Waits in a detached task, which cancellation does not reach, until the gate opens.
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                Task.detached {
                    for await _ in gate {}
                    c.resume()
                }
            }
            return ["Authorization": "Bearer late"]
        }
        let fresh = await HeaderRefresh.run(refresh, for: upload) { _ in
            try await Task.sleep(for: .milliseconds(10))  // the limit
        }
        #expect(fresh == nil)
        open.finish()  // the refresh ends now, long after its answer was given
    }

    @Test func theRefreshSeesWhichMessageAndWhatItCarries() async {
        let refresh: DelayedUploadRefresh = { upload in
            upload.headers.merging(["Seen": "\(upload.messageID != nil)"]) { $1 }
        }
        let seen = await HeaderRefresh.run(refresh, for: upload)
        #expect(seen?["Seen"] == "true" && seen?["Authorization"] == "Bearer old")
    }
}
