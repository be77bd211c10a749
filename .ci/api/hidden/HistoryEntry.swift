import Cairn
func f(_ entry: HistoryEntry) {}
