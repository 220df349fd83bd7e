#!/usr/bin/env python3
"""How well does data/language.py's detector name the language of short UI strings? (issue 44, part 3)

    PYTHONPATH=src .venv/bin/python benchmarks/language_detection.py [--lines 1000] [--lingua]

Three sets of lines:
- English: the first 1,000 source lines of the bundled en-zh corpus's test split (`load_pairs("en-zh", "test")`,
  as the tests load it: software UI and help strings);
- Chinese: the target side of the same lines;
- French: the 50 short UI-like sentences below, written for this benchmark in the style of desktop-application
  menus, buttons and messages (our own text, taken from no corpus or translation memory).

For each set it prints the accuracy (the detected language is the right one) and the warning rate: the share of
lines for which an en->zh model's wrong-language warning fires (another language, confidence >= CONFIDENT).
On the English lines that rate is the false alarms; on French and Chinese it is the catch rate. --lingua also
measures lingua-language-detector over the same 16 languages (if installed), the alternative we weighed.
It only reads the bundled corpus; it writes nothing.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence

from scratchformer.data.corpus import load_pairs
from scratchformer.data.language import CONFIDENT, LANGUAGE_NAMES, detect

FRENCH = (
    "Bonjour", "Ouvrir le fichier", "Enregistrer sous...", "Fermer la fenêtre", "Annuler",
    "Voulez-vous enregistrer les modifications ?", "Le fichier n'existe pas.", "Imprimer le document",
    "Paramètres avancés", "Copier la sélection", "Coller depuis le presse-papiers", "Rechercher et remplacer",
    "Afficher la barre d'outils", "Masquer les fichiers cachés", "Nouveau dossier", "Supprimer définitivement",
    "Êtes-vous sûr de vouloir quitter ?", "Mot de passe incorrect", "Connexion impossible au serveur",
    "Vérifier les mises à jour", "Redémarrer maintenant", "Plus tard", "Aide en ligne", "À propos de ce logiciel",
    "Insérer une image", "Police et taille du texte", "Aligner à gauche", "Centrer le paragraphe",
    "Le téléchargement est terminé.", "Une erreur inattendue s'est produite.", "Choisissez un emplacement",
    "Fichiers récents", "Exporter au format PDF", "Importer des contacts", "Langue de l'interface",
    "Activer les notifications", "Désactiver le son", "Taille du fichier trop grande", "Renommer l'élément",
    "Déplacer vers la corbeille", "Vider la corbeille", "Sélectionner tout", "Zoom avant", "Zoom arrière",
    "Plein écran", "Quitter l'application", "Envoyer un message", "Répondre à tous", "Pièce jointe manquante",
    "La page demandée est introuvable.",
)


def measure(name: str, lines: Sequence[str], code: str, detector: Callable[[str], tuple[str | None, float]]) \
        -> None:
    start = time.perf_counter()
    found = [detector(line) for line in lines]
    seconds = time.perf_counter() - start
    right = sum(c == code for c, _ in found)
    warned = sum(c is not None and c != "en" and p >= CONFIDENT for c, p in found)
    wrong = {}
    for c, _ in found:
        if c != code:
            wrong[c] = wrong.get(c, 0) + 1
    top = ", ".join(f"{c} {n}" for c, n in sorted(wrong.items(), key=lambda kv: -kv[1])[:4])
    print(f"  {name:<8} {len(lines):>5} lines  accuracy {right / len(lines):6.1%}  warned (en->zh model) "
          f"{warned / len(lines):6.1%}  {seconds * 1000 / len(lines):5.2f} ms/line  mistaken for: {top or '-'}")


def lingua_detector() -> Callable[[str], tuple[str | None, float]] | None:
    try:
        from lingua import IsoCode639_1, Language, LanguageDetectorBuilder
    except ImportError:
        return None
    languages = [Language.from_iso_code_639_1(getattr(IsoCode639_1, code.upper())) for code in LANGUAGE_NAMES]
    lingua = LanguageDetectorBuilder.from_languages(*languages).build()

    def detector(text: str) -> tuple[str | None, float]:
        values = lingua.compute_language_confidence_values(text)
        if not values:
            return None, 0.0
        return values[0].language.iso_code_639_1.name.lower(), values[0].value

    return detector


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lines", type=int, default=1000, help="English / Chinese test lines (default 1000)")
    parser.add_argument("--lingua", action="store_true", help="also measure lingua-language-detector")
    args = parser.parse_args()
    pairs = load_pairs("en-zh", "test")[:args.lines]
    sets = (("English", [s for s, _ in pairs], "en"), ("Chinese", [t for _, t in pairs], "zh"),
            ("French", list(FRENCH), "fr"))
    start = time.perf_counter()
    detect("warm up")  # loads py3langid's model
    print(f"data/language.py (py3langid over {len(LANGUAGE_NAMES)} languages, CJK by script), warning at "
          f"confidence >= {CONFIDENT}; model load {time.perf_counter() - start:.1f} s")
    for name, lines, code in sets:
        measure(name, lines, code, detect)
    if args.lingua:
        detector = lingua_detector()
        if detector is None:
            print("lingua-language-detector is not installed")
            return
        print(f"lingua-language-detector over the same {len(LANGUAGE_NAMES)} languages")
        for name, lines, code in sets:
            measure(name, lines, code, detector)


if __name__ == "__main__":
    main()
