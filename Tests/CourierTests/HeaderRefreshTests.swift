@testable @_spi(CourierTesting) import CourierKit
import CourierTesting
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

    func request(beginning begin: Date, tags: Set<String> = []) -> BackgroundUploadRequest {
        var request = BackgroundUploadRequest(
            url: upload.url, headers: upload.headers, bodyFile: URL(fileURLWithPath: "/b"), bodyByteCount: 2,
            earliestBeginDate: begin, taskDescription: HandOff.taskDescription(MessageID(), attempt: 1, ticket: 7))
        request.tags = tags
        return request
    }

    /// The system asks the delegate to refresh only a task with a begin date: with a refresh,
    /// every task gets one (an upload made now and started hours later carried stale headers);
    /// without, only a backoff still ahead sets one.
    @Test func withARefreshEveryUploadHasABeginDateSoTheSystemAsksBeforeEachOne() {
        let now = Date(timeIntervalSince1970: 1_000_000)
        let due = request(beginning: now.addingTimeInterval(-5)), later = request(beginning: now + 60)
        #expect(HeaderRefresh.beginDate(of: due, now: now, refreshes: true) == now + HeaderRefresh.minimumDelay)
        #expect(HeaderRefresh.beginDate(of: later, now: now, refreshes: true) == now + 60)
        #expect(HeaderRefresh.beginDate(of: due, now: now, refreshes: false) == nil)
        #expect(HeaderRefresh.beginDate(of: later, now: now, refreshes: false) == now + 60)
    }

    /// The message's tags reach the refresh through the task's description, whatever they
    /// hold; Courier still knows the task by the description it gave.
    @Test func theRefreshSeesTheMessagesTagsAndCourierItsOwnDescription() {
        let tags: Set<String> = ["account:1", "with space", "a,b", "ünï"]
        let tagged = request(beginning: Date(), tags: tags)
        let described = HeaderRefresh.describe(tagged)
        #expect(HeaderRefresh.split(description: described).courier == tagged.taskDescription)
        #expect(HeaderRefresh.split(description: described).tags == tags)
        let seen = HeaderRefresh.delayedUpload(description: described, url: upload.url, headers: upload.headers)
        #expect(seen.tags == tags && seen.messageID == HandOff.parse(taskDescription: tagged.taskDescription)?.id)
        let plain = request(beginning: Date())
        #expect(HeaderRefresh.describe(plain) == plain.taskDescription)
        #expect(HeaderRefresh.split(description: "an app's own task").courier == "an app's own task")
    }

    /// A hand-off gives the session the message's tags.
    @Test func aHandOffCarriesTheMessagesTags() async throws {
        let session = RecordingSession()
        var configuration = testConfiguration(clock: ManualClock(), transport: ScriptedTransport())
        configuration.backgroundUploads = Courier.BackgroundUploads(session: session)
        let scratch = TemporaryDirectory()
        let courier = try Courier(directory: scratch.url, configuration: configuration)
        await courier.core.status.reconciliation?.value
        courier.pause()
        _ = try courier.send(["n": 1], to: inbox, tags: ["account:2"])
        #expect(await courier.appDidEnterBackground() == 1)
        #expect(session.requests.withLock { $0.map(\.tags) } == [["account:2"]])
        await courier.close()
    }
}
