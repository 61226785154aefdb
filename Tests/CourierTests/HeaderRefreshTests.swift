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

    @Test func theRefreshSeesWhichMessageAndWhatItCarries() async {
        let refresh: DelayedUploadRefresh = { upload in
            upload.headers.merging(["Seen": "\(upload.messageID != nil)"]) { $1 }
        }
        let seen = await HeaderRefresh.run(refresh, for: upload)
        #expect(seen?["Seen"] == "true" && seen?["Authorization"] == "Bearer old")
    }
}
