import Foundation
import Testing
import TetherService
import TetherTesting

/// The exit codes in the code and the table in README.md are the same.
@Suite struct ExitCodeTableTests {
    @Test func everyExitCodeIsInTheReadmesTableWithItsName() throws {
        let readme = try String(contentsOfFile: Programs.packageRoot + "/README.md", encoding: .utf8)
        let section = try #require(readme.components(separatedBy: "## Exit codes").dropFirst().first?.components(separatedBy: "\n## ").first)
        let rows = section.split(separator: "\n").filter { $0.hasPrefix("| ") && !$0.hasPrefix("| exit") && !$0.hasPrefix("| ---") }
        let table = rows.map { row in row.split(separator: "|").prefix(2).map { $0.trimmingCharacters(in: .whitespaces) } }
        #expect(table.map { $0.joined(separator: " ") } == TetherExitCode.allCases.map { "\($0.rawValue) \($0)" })
    }
}
