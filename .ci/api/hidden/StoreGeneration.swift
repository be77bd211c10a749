import Cairn
func f(_ token: QueryGenerationToken) { _ = token.generation }
