"""What a voice design speaks, per language: one table.

Per language (the part of its code before '-': en-us and en-gb share "en"):
  scoring    3 sentences: the start's scores (every pool voice, cached) and the guard's loudness,
             length and pitch ranges are measured on them;
  more       12 more: scoring + more is the rotating pool a search draws a fresh ROTATE_K of at
             each step, so a change is kept only if it wins on sentences it was not tuned on
             (what it learns is the voice, not three sentences' content);
  held_out   3 sentences never scored: how close a design came is measured on them
             (bench/voice_design.py).
The three are disjoint, and disjoint from bench/voice_design.py's target text. Every language
says the same things (a lighthouse keeper, the salt, kites; a map, apples, a committee ...), with
statements and questions in the same places, so that designs in two languages are scored on
speech of the same kinds. No digits: each language reads numbers its own
way, and a design should be scored on its voice, not on its number words.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Sentences:
    scoring: tuple[str, ...]
    more: tuple[str, ...]
    held_out: tuple[str, ...]

    @property
    def rotating(self) -> tuple[str, ...]:
        return self.scoring + self.more


SENTENCES: dict[str, Sentences] = {
    "en": Sentences(
        scoring=("The old lighthouse keeper watched the storm roll in across the bay.",
                 "Could you pass me the salt and the pepper, please?",
                 "Seven bright kites danced above the quiet village green."),
        more=("She folded the map twice and slipped it into her coat pocket.",
              "How many apples did you say were left in the basket?",
              "The committee will announce its decision early next week.",
              "A cold wind whistled through the broken window of the barn.",
              "Please remember to water the tomatoes before you leave.",
              "He laughed so hard that he nearly dropped his coffee.",
              "Thousands of birds gathered on the frozen lake at dawn.",
              "Why would anyone paint a bicycle bright purple?",
              "The museum opens at ten and closes at half past five.",
              "Our neighbours are moving to a farm in the mountains.",
              "Turn left at the fountain, then walk straight for two blocks.",
              "The violinist tuned her instrument while the audience waited."),
        held_out=("My grandmother kept every letter she ever received in a wooden box.",
                  "The train to the coast leaves at a quarter past nine tomorrow morning.",
                  "Nobody expected the small bakery to win the national prize.")),
    "es": Sentences(
        scoring=("El viejo farero miraba cómo llegaba la tormenta sobre la bahía.",
                 "¿Me pasas la sal y la pimienta, por favor?",
                 "Siete cometas brillantes bailaban sobre la plaza tranquila."),
        more=("Ella dobló el mapa dos veces y lo guardó en el bolsillo del abrigo.",
              "¿Cuántas manzanas dijiste que quedaban en la cesta?",
              "El comité anunciará su decisión a principios de la próxima semana.",
              "Un viento frío silbaba por la ventana rota del granero.",
              "Por favor, acuérdate de regar los tomates antes de salir.",
              "Se rió tanto que casi se le cae el café.",
              "Miles de pájaros se reunieron en el lago helado al amanecer.",
              "¿Por qué alguien pintaría una bicicleta de color morado?",
              "El museo abre por la mañana y cierra a media tarde.",
              "Nuestros vecinos se mudan a una granja en las montañas.",
              "Gira a la izquierda en la fuente y sigue recto dos calles.",
              "La violinista afinó su instrumento mientras el público esperaba."),
        held_out=("Mi abuela guardaba todas las cartas que recibía en una caja de madera.",
                  "El tren a la costa sale mañana temprano, poco después de las nueve.",
                  "Nadie esperaba que la pequeña panadería ganara el premio nacional.")),
    "fr": Sentences(
        scoring=("Le vieux gardien du phare regardait la tempête arriver sur la baie.",
                 "Pourriez-vous me passer le sel et le poivre, s'il vous plaît ?",
                 "Sept cerfs-volants dansaient au-dessus du village tranquille."),
        more=("Elle plia la carte deux fois et la glissa dans la poche de son manteau.",
              "Combien de pommes disais-tu qu'il restait dans le panier ?",
              "Le comité annoncera sa décision au début de la semaine prochaine.",
              "Un vent froid sifflait à travers la fenêtre cassée de la grange.",
              "N'oublie pas d'arroser les tomates avant de partir, s'il te plaît.",
              "Il a tellement ri qu'il a failli renverser son café.",
              "Des milliers d'oiseaux se sont rassemblés sur le lac gelé à l'aube.",
              "Pourquoi quelqu'un peindrait-il un vélo en violet vif ?",
              "Le musée ouvre le matin et ferme en fin d'après-midi.",
              "Nos voisins déménagent dans une ferme à la montagne.",
              "Tournez à gauche à la fontaine, puis continuez tout droit.",
              "La violoniste accordait son instrument pendant que le public attendait."),
        held_out=("Ma grand-mère gardait toutes ses lettres dans une boîte en bois.",
                  "Le train pour la côte part demain matin, un peu après neuf heures.",
                  "Personne ne s'attendait à ce que la petite boulangerie gagne le prix national.")),
    "hi": Sentences(
        scoring=("बूढ़ा प्रकाशस्तंभ रक्षक खाड़ी के ऊपर आते तूफ़ान को देख रहा था।",
                 "क्या आप मुझे नमक और काली मिर्च दे सकते हैं?",
                 "सात चमकीली पतंगें शांत गाँव के ऊपर नाच रही थीं।"),
        more=("उसने नक्शे को दो बार मोड़ा और अपनी जेब में रख लिया।",
              "तुमने कहा था टोकरी में कितने सेब बचे हैं?",
              "समिति अगले हफ़्ते की शुरुआत में अपना फ़ैसला सुनाएगी।",
              "टूटी खिड़की से ठंडी हवा सीटी बजाती हुई अंदर आ रही थी।",
              "जाने से पहले टमाटरों को पानी देना मत भूलना।",
              "वह इतना हँसा कि उसकी चाय लगभग गिर गई।",
              "सुबह सुबह हज़ारों पक्षी जमी हुई झील पर इकट्ठा हुए।",
              "कोई अपनी साइकिल को बैंगनी रंग से क्यों रंगेगा?",
              "संग्रहालय सुबह खुलता है और शाम को बंद होता है।",
              "हमारे पड़ोसी पहाड़ों में एक खेत पर रहने जा रहे हैं।",
              "फव्वारे से बाएँ मुड़ें और सीधे चलते रहें।",
              "श्रोता इंतज़ार करते रहे और वायलिन वादक ने अपना वाद्य मिलाया।"),
        held_out=("मेरी दादी हर चिट्ठी लकड़ी के एक बक्से में संभाल कर रखती थीं।",
                  "समुद्र तट की ट्रेन कल सुबह जल्दी निकलेगी।",
                  "किसी को उम्मीद नहीं थी कि वह छोटी बेकरी राष्ट्रीय पुरस्कार जीतेगी।")),
    "it": Sentences(
        scoring=("Il vecchio guardiano del faro guardava la tempesta arrivare sulla baia.",
                 "Mi passi il sale e il pepe, per favore?",
                 "Sette aquiloni luminosi danzavano sopra il villaggio tranquillo."),
        more=("Lei piegò la mappa due volte e la infilò nella tasca del cappotto.",
              "Quante mele hai detto che erano rimaste nel cestino?",
              "Il comitato annuncerà la sua decisione all'inizio della prossima settimana.",
              "Un vento freddo fischiava attraverso la finestra rotta del fienile.",
              "Per favore, ricordati di innaffiare i pomodori prima di uscire.",
              "Ha riso così tanto che per poco non ha rovesciato il caffè.",
              "Migliaia di uccelli si sono radunati sul lago ghiacciato all'alba.",
              "Perché mai qualcuno dipingerebbe una bicicletta di viola acceso?",
              "Il museo apre la mattina e chiude nel tardo pomeriggio.",
              "I nostri vicini si trasferiscono in una fattoria in montagna.",
              "Giri a sinistra alla fontana, poi prosegua sempre dritto.",
              "La violinista accordava lo strumento mentre il pubblico aspettava."),
        held_out=("Mia nonna conservava tutte le lettere in una scatola di legno.",
                  "Il treno per la costa parte domani mattina poco dopo le nove.",
                  "Nessuno si aspettava che la piccola panetteria vincesse il premio nazionale.")),
    "ja": Sentences(
        scoring=("年老いた灯台守は、湾に近づく嵐を見つめていた。",
                 "塩とこしょうを取っていただけますか？",
                 "七つの明るい凧が、静かな村の上で踊っていた。"),
        more=("彼女は地図を二回折って、コートのポケットに入れた。",
              "かごにりんごがいくつ残っていると言いましたか？",
              "委員会は来週の初めに決定を発表します。",
              "冷たい風が、納屋の割れた窓から吹き込んできた。",
              "出かける前に、トマトに水をやるのを忘れないでね。",
              "彼は笑いすぎて、コーヒーをこぼしそうになった。",
              "夜明けに、何千羽もの鳥が凍った湖に集まった。",
              "どうして自転車を紫色に塗る人がいるんだろう？",
              "博物館は朝に開いて、夕方に閉まります。",
              "隣の家族は、山の中の農場に引っ越すそうです。",
              "噴水のところで左に曲がって、まっすぐ歩いてください。",
              "観客が待つ間、バイオリン奏者は楽器の調弦をした。"),
        held_out=("祖母は受け取った手紙をすべて木の箱にしまっていた。",
                  "海辺へ行く電車は、明日の朝早くに出発します。",
                  "小さなパン屋が全国大会で優勝するとは、誰も思わなかった。")),
    "pt": Sentences(
        scoring=("O velho faroleiro observava a tempestade chegar pela baía.",
                 "Você pode me passar o sal e a pimenta, por favor?",
                 "Sete pipas brilhantes dançavam sobre a praça tranquila."),
        more=("Ela dobrou o mapa duas vezes e o guardou no bolso do casaco.",
              "Quantas maçãs você disse que sobraram na cesta?",
              "O comitê vai anunciar a decisão no começo da próxima semana.",
              "Um vento frio assobiava pela janela quebrada do celeiro.",
              "Por favor, lembre de regar os tomates antes de sair.",
              "Ele riu tanto que quase derrubou o café.",
              "Milhares de pássaros se reuniram no lago congelado ao amanhecer.",
              "Por que alguém pintaria uma bicicleta de roxo?",
              "O museu abre de manhã e fecha no fim da tarde.",
              "Nossos vizinhos vão se mudar para uma fazenda nas montanhas.",
              "Vire à esquerda na fonte e siga em frente por duas quadras.",
              "A violinista afinou o instrumento enquanto a plateia esperava."),
        held_out=("Minha avó guardava todas as cartas que recebia numa caixa de madeira.",
                  "O trem para o litoral sai amanhã cedo, pouco depois das nove.",
                  "Ninguém esperava que a pequena padaria ganhasse o prêmio nacional.")),
    "zh": Sentences(
        scoring=("老灯塔看守望着暴风雨从海湾那边涌来。",
                 "你能把盐和胡椒递给我吗？",
                 "七只明亮的风筝在安静的村庄上空飞舞。"),
        more=("她把地图折了两次，放进了大衣口袋。",
              "你说篮子里还剩几个苹果？",
              "委员会将在下周初宣布决定。",
              "冷风从谷仓破了的窗户里呼呼地吹进来。",
              "出门之前，别忘了给西红柿浇水。",
              "他笑得太厉害，差点把咖啡打翻了。",
              "黎明时分，成千上万只鸟聚集在结冰的湖面上。",
              "为什么会有人把自行车漆成紫色呢？",
              "博物馆早上开门，傍晚关门。",
              "我们的邻居要搬到山里的农场去了。",
              "在喷泉那里向左转，然后一直往前走。",
              "观众等待的时候，小提琴手调好了她的琴。"),
        held_out=("我奶奶把收到的每一封信都放在一个木盒子里。",
                  "去海边的火车明天一早就出发。",
                  "谁也没想到那家小面包店会赢得全国大奖。")),
}


def sentences_of(language: str) -> Sentences:
    """The sentences of a language code or alias's base ('en-gb' -> "en"); KeyError if none."""
    return SENTENCES[language.split("-")[0]]
