import Cairn
func f(_ c: Container) { _ = c.coordinator }
