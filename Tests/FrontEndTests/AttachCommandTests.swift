import Foundation
import Testing
import TetherSchema

@testable import FrontEnd

/// The terminal UI's `/attach PATH`, `/attach` and `/detach`: the images wait above the input
/// line and go with the next message, once.
@Suite struct AttachCommandTests {
    let start = ContinuousClock.now
    static let png = Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) + Data(repeating: 5, count: 92)

    private func type(_ line: String, into screen: inout ChatScreen) -> ChatAction? {
        for character in line { _ = screen.handle(.character(character), at: start) }
        return screen.handle(.enter, at: start)
    }

    @Test func anAttachedImageIsShownAboveTheInputLineAndGoesWithTheNextMessageOnly() throws {
        var screen = ChatScreen(frontEnd: "tether", frame: FirstFrame(display: nil, identity: nil, entries: [], revision: 0))
        #expect(type("/attach", into: &screen) == nil)
        #expect(screen.render(width: 120, height: 8, at: start).rows.contains { $0.text.contains("nothing attached: /attach PATH adds an image") })
        #expect(type("/attach ~/cat.png", into: &screen) == .attach("~/cat.png"))
        // What the session read at the edge comes back to the screen.
        screen.attach(ImageAttachments.attachment(named: "cat.png", bytes: Self.png))
        let rows = screen.render(width: 120, height: 8, at: start).rows
        #expect(rows[rows.count - 2].text == "Attached: cat.png (image/png, 100 bytes) (/detach removes)", "\(rows.map(\.text))")
        #expect(rows.last?.text == "> ")
        screen.attach(ImageAttachments.attachment(named: "notes.txt", bytes: Data("words".utf8)))
        #expect(screen.render(width: 200, height: 8, at: start).rows.contains { $0.text.hasPrefix("not attached: notes.txt is not an image Tether can send") })
        #expect(screen.images.count == 1, "the refused file was not added")
        guard case .send(let text, let images, _)? = type("look", into: &screen) else {
            Issue.record("not sent")
            return
        }
        #expect(text == "look" && images.map(\.name) == ["cat.png"])
        #expect(screen.images.isEmpty)
        #expect(type("again", into: &screen) == .send("again", images: []), "the image went with one message only")
    }

    @Test func detachRemovesWhatWasAttachedAndAnUnsentImageIsKept() throws {
        var screen = ChatScreen(frontEnd: "tether", frame: FirstFrame(display: nil, identity: nil, entries: [], revision: 0))
        screen.attach(ImageAttachments.attachment(named: "a.png", bytes: Self.png))
        screen.attach(ImageAttachments.attachment(named: "b.png", bytes: Self.png))
        #expect(type("/attach", into: &screen) == nil)
        #expect(
            screen.render(width: 200, height: 8, at: start).rows.contains {
                $0.text.hasPrefix("attached to the next message: a.png (image/png, 100 bytes); b.png (image/png, 100 bytes); /detach removes them")
            })
        #expect(type("/detach", into: &screen) == nil)
        #expect(screen.images.isEmpty)
        #expect(screen.render(width: 200, height: 8, at: start).rows.contains { $0.text.hasPrefix("removed the 2 images: the next message goes without") })
        // A send refused before it was queued gives its images back.
        let image = try ImageAttachments.attachment(named: "c.png", bytes: Self.png).get()
        screen.keep([image])
        #expect(screen.images == [image])
    }
}
